// Bench files as `saobp cost --bench` reads them (src/study/cost.cpp): the JSON of `saobp bench
// --json` (a training step) or `saobp bench --inference --json`, against the config of
// tests/malformed/cases/config/minimal.toml (BERT, B = 32, T = 128). Selector byte: bit 0 hands
// the file over twice; the rest is the file. The table is then written as markdown.
#include "harness.h"
#include "study/cost.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  static const RunConfig cfg = load_config_text(
      "[model]\nfamily = \"bert\"\n[train]\nbatch_size = 32\nseq_len = 128\n[data]\nkind = \"synthetic\"\n",
      "bench.toml");
  fuzz::BenchInput in(data, size);
  std::vector<std::string> files = {fuzz::put(in.dir, "bench.json", in.part(true))};
  if (in.sel & 1) files.push_back(files[0]);
  fuzz::check([&] {
    const nlohmann::json t = study::cost_table(cfg, {"original", "bp_high", "bp_low", "bp_elemmul"}, files);
    (void)study::cost_markdown(t);
  });
  return 0;
}
