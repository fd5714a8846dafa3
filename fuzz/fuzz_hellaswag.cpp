// HellaSwag (src/data/benchmarks/hellaswag.cpp). Selector byte: bit 0 skip_bad_rows; the rest
// is hellaswag_train.jsonl.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  fuzz::put(in.dir, "hellaswag_train.jsonl", in.part(true));
  fuzz::check([&] { (void)bench::read_hellaswag(in.dir.string(), "train", in.opt); });
  return 0;
}
