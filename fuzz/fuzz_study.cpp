// study.json and the results.json of its runs, as `saobp correlate` reads a study folder
// (src/study/correlate.cpp), or a run folder's metrics.jsonl, or an analysis folder's
// per_sample.csv and analysis.json. Selector byte: bits 0-1 the metric pair (two pretraining
// metrics, a fine-tuning metric against a pretraining one, two per-layer metrics, a metric no run
// has; for an analysis folder: B's gtd and clustering, A's gtd and betweenness, tokens and
// entropy, a column that does not exist); bit 2 makes the first part metrics.jsonl (a run folder)
// instead of study.json; bit 3 makes the folder an analysis folder (bit 2 then keeps only layer 0).
// Parts: that file, then the results.json of runs/a/, runs/b/ and runs/c/; for an analysis
// folder, per_sample.csv then analysis.json.
#include "harness.h"
#include "study/correlate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  static const char* pairs[][2] = {{"loss", "accuracy"},
                                   {"glue/sst2:dev.accuracy", "loss"},
                                   {"entropy_L0", "gtd_L1"},
                                   {"nothing", "loss"}};
  static const char* sample_pairs[][2] = {
      {"gtd", "clustering"}, {"A.gtd", "betweenness"}, {"tokens", "entropy"}, {"sinky", "gtd"}};
  if (in.sel & 8) {
    fuzz::put(in.dir, "per_sample.csv", in.part());
    if (!in.empty()) fuzz::put(in.dir, "analysis.json", in.part(true));
    study::CorrelateOptions o;
    if (in.sel & 4) o.layers = {0};
    fuzz::check([&] {
      (void)study::correlate_sources({in.dir.string()}, sample_pairs[in.sel % 4][0],
                                     sample_pairs[in.sel % 4][1], o);
    });
    return 0;
  }
  const char *x = pairs[in.sel % 4][0], *y = pairs[in.sel % 4][1];
  fuzz::put(in.dir, in.sel & 4 ? "metrics.jsonl" : "study.json", in.part());
  for (const char* run : {"a", "b", "c"})
    if (!in.empty()) fuzz::put(in.dir, std::string("runs/") + run + "/results.json", in.part(*run == 'c'));
  fuzz::check([&] { (void)study::correlate_sources({in.dir.string()}, x, y); });
  return 0;
}
