// GLUE (src/data/benchmarks/glue.cpp). Selector byte: bit 0 skip_bad_rows; bits 1-7 choose the
// task (% 9) and the split ((/ 9) % 3: train, dev, test; MNLI's dev_matched and test_matched);
// the rest is that split's .tsv in the task folder.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  const std::string task = bench::glue_tasks()[(in.sel >> 1) % 9];
  static const char* splits[] = {"train", "dev", "test"};
  std::string split = splits[((in.sel >> 1) / 9) % 3];
  if (task == "mnli" && split != "train") split += "_matched";
  fuzz::put(in.dir, split + ".tsv", in.part(true));
  fuzz::check([&] { (void)bench::read_glue(task, in.dir.string(), split, in.opt); });
  return 0;
}
