// RACE (src/data/benchmarks/race.cpp). Selector byte: bit 0 skip_bad_rows, (bits 1-7) % 3 the
// level (middle, high, all); up to four '\0'-separated parts are passage files, alternately
// train/middle/N.txt and train/high/N.txt.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  static const char* levels[] = {"middle", "high", "all"};
  fuzz::fs::create_directories(in.dir / "train" / "middle");
  fuzz::fs::create_directories(in.dir / "train" / "high");
  for (int i = 0; i < 4 && !in.empty(); ++i)
    fuzz::put(in.dir, fmt::format("train/{}/{}.txt", i % 2 ? "high" : "middle", i + 1), in.part(i == 3));
  fuzz::check([&] { (void)bench::read_race(in.dir.string(), levels[(in.sel >> 1) % 3], "train", in.opt); });
  return 0;
}
