// study.json and the results.json of its runs, as `saobp correlate` reads a study folder
// (src/study/correlate.cpp), or a run folder's metrics.jsonl. Selector byte: bits 0-1 the metric
// pair (two pretraining metrics, a fine-tuning metric against a pretraining one, two per-layer
// metrics, a metric no run has); bit 2 makes the first part metrics.jsonl (a run folder) instead
// of study.json. Parts: that file, then the results.json of runs/a/, runs/b/ and runs/c/.
#include "harness.h"
#include "study/correlate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  static const char* pairs[][2] = {{"loss", "accuracy"},
                                   {"glue/sst2:dev.accuracy", "loss"},
                                   {"entropy_L0", "gtd_L1"},
                                   {"nothing", "loss"}};
  const char *x = pairs[in.sel % 4][0], *y = pairs[in.sel % 4][1];
  fuzz::put(in.dir, in.sel & 4 ? "metrics.jsonl" : "study.json", in.part());
  for (const char* run : {"a", "b", "c"})
    if (!in.empty()) fuzz::put(in.dir, std::string("runs/") + run + "/results.json", in.part(*run == 'c'));
  fuzz::check([&] { (void)study::correlate_sources({in.dir.string()}, x, y); });
  return 0;
}
