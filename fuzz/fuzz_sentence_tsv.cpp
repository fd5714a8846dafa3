// The sentence TSV layout (src/data/benchmarks/text_tasks.cpp, the fortunes topic task).
// Selector byte: bit 0 skip_bad_rows; then train.tsv and labels.txt, '\0'-separated.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  fuzz::put(in.dir, "train.tsv", in.part());
  fuzz::put(in.dir, "labels.txt", in.part(true));
  fuzz::check([&] { (void)bench::read_sentence_tsv(in.dir.string(), "train", in.opt); });
  return 0;
}
