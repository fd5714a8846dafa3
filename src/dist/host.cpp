// The host name, shared by both twins of comm.h.
#include <unistd.h>

#include "dist/comm.h"

namespace saobp::dist {

std::string host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace saobp::dist
