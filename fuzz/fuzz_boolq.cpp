// BoolQ (src/data/benchmarks/text_tasks.cpp). Selector byte: bit 0 skip_bad_rows, (bits 1-7)
// % 3 the split (train, dev, test: test has no answers); the rest is <split>.jsonl.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  static const char* splits[] = {"train", "dev", "test"};
  const std::string split = splits[(in.sel >> 1) % 3];
  fuzz::put(in.dir, split + ".jsonl", in.part(true));
  fuzz::check([&] { (void)bench::read_boolq(in.dir.string(), split, in.opt); });
  return 0;
}
