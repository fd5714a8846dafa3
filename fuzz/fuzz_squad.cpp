// SQuAD v1.1 / v2.0 (src/data/benchmarks/squad.cpp). Selector byte: bit 0 skip_bad_rows; the
// rest is the JSON file.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  const std::string path = fuzz::put(in.dir, "dev-v2.0.json", in.part(true));
  fuzz::check([&] { (void)bench::read_squad(path, in.opt); });
  return 0;
}
