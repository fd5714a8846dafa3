// WikiText (src/data/benchmarks/wikitext.cpp). Selector byte: bit 0 set: wiki.train.raw, clear:
// wiki.train.tokens; the rest is the file.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  fuzz::put(in.dir, in.sel & 1 ? "wiki.train.raw" : "wiki.train.tokens", in.part(true));
  fuzz::check([&] { (void)bench::read_wikitext(in.dir.string(), "train"); });
  return 0;
}
