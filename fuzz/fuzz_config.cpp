// The run configuration (src/train/config.h): the first '\0'-separated part is the TOML file,
// the rest holds one "section.key=value" override per line. A config that loads must survive
// to_toml and load again to the same value (the file a run writes reproduces the run).
#include <algorithm>
#include <cstdlib>

#include "harness.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::Input in(data, size);
  const std::string text(in.part());
  std::vector<std::string> overrides;
  const std::string_view rest = in.part(true);
  for (size_t b = 0; b < rest.size();) {
    const size_t e = std::min(rest.find('\n', b), rest.size());
    overrides.emplace_back(rest.substr(b, e - b));
    b = e + 1;
  }
  fuzz::check([&] {
    const RunConfig cfg = load_config_text(text, "fuzz.toml", overrides);
    const RunConfig again = load_config_text(to_toml(cfg), "fuzz.toml");
    if (!(again == cfg)) std::abort();  // to_toml lost or changed a value
  });
  return 0;
}
