#include "core/cpu_times.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace saobp {

double peak_rss_bytes() {
  struct rusage u {};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux gives KiB
}

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream f("/proc/stat");
  std::string name;
  if (!(f >> name) || name != "cpu") return t;
  double v;
  for (int i = 0; i < 10 && (f >> v);
       ++i) {  // user nice system idle iowait irq softirq steal guest guest_nice
    if (i < 8) t.total += v;
    if (i < 3 || i == 5 || i == 6) t.busy += v;
    if (i == 7) t.steal = v, t.ok = true;
  }
  std::ifstream self("/proc/self/stat");
  std::string line;
  if (std::getline(self, line) && line.rfind(')') != std::string::npos) {
    std::istringstream in(line.substr(line.rfind(')') + 2));  // from field 3 (state) on
    std::string field;
    double utime = 0, stime = 0;
    for (int k = 3; k <= 13 && (in >> field); ++k) {
    }
    if (in >> utime >> stime) t.self = utime + stime, t.self_ok = true;  // fields 14, 15
  }
  return t;
}

double steal_fraction(const CpuTimes& a, const CpuTimes& b) {
  if (!a.ok || !b.ok || b.total <= a.total) return -1;
  return (b.steal - a.steal) / (b.total - a.total);
}

double others_fraction(const CpuTimes& a, const CpuTimes& b) {
  if (!a.ok || !b.ok || !a.self_ok || !b.self_ok || b.total <= a.total) return -1;
  return std::max(0.0, ((b.busy - a.busy) - (b.self - a.self)) / (b.total - a.total));
}

}  // namespace saobp
