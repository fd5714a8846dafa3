// The JSON files `saobp report` draws (src/report/report.cpp, sections.cpp): a results.json of
// `saobp finetune` or `saobp eval --task`, a `saobp correlate --out` file, a `saobp cost --out`
// file, each told apart by its keys. Selector byte: bit 0 hands the file over twice (two rows
// of one table); the rest is the file. The page is built in memory, not written.
#include "harness.h"
#include "report/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  ReportOptions opt;
  opt.runs = {fuzz::put(in.dir, "r/results.json", in.part(true))};
  if (in.sel & 1) opt.runs.push_back(opt.runs[0]);
  fuzz::check([&] { (void)build_report(opt); });
  return 0;
}
