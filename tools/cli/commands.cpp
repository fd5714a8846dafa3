#include "cli/commands.h"

#include <vector>

namespace saobp::cli {

namespace {
struct Entry {
  CLI::App* sub;
  std::function<int()> run;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

void add_command(CLI::App* sub, std::function<int()> run) { registry().push_back({sub, std::move(run)}); }

CLI::Option* add_resume_options(CLI::App* sub, std::string& resume, bool& overwrite) {
  CLI::Option* r = sub->add_option("--resume", resume,
                                   "continue the run from this checkpoint directory, or (no value) from the "
                                   "run directory's latest complete checkpoint");
  r->expected(0, 1);
  sub->add_flag("--overwrite", overwrite, "start a new run in a run directory that holds one, replacing it")
      ->excludes(r);
  return r;
}

void register_all(CLI::App& app) {
  register_info(app);
  register_smoke(app);
  register_bench_kernels(app);
  register_gradcheck(app);
  register_explain(app);
  register_bench_step(app);
  register_train(app);
  register_eval(app);
  register_bench(app);
  register_vocab(app);
  register_tokenize(app);
  register_bench_tokenize(app);
  register_report(app);
  register_analyze(app);
  register_finetune(app);
  register_make_task(app);
  register_glue_score(app);
}

int run_selected(CLI::App& app) {
  (void)app;
  for (const Entry& e : registry())
    if (e.sub->parsed()) return e.run();
  return 1;
}

}  // namespace saobp::cli
