// `saobp train CONFIG [section.key=value ...]`: a run from a TOML config, or its continuation.
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "train/trainer.h"

namespace saobp::cli {

namespace {

struct TrainCli {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume, init;
  bool resume_latest = false, overwrite = false;
  bool quiet = false;
  bool init_given = false;  // --init on the command line, '' too
};

int run_train(const TrainCli& o) {
  if (o.init_given) check_input_folder("train", "--init", o.init);  // before the data is tokenized
  const RunConfig cfg = load_config(o.config, o.overrides);
  fmt::print("# resolved config ({}{}{})\n{}\n", o.config, o.overrides.empty() ? "" : " with ",
             fmt::join(o.overrides, " "), to_toml(cfg));
  int64_t total = 0, emb = 0;
  auto count = [&](const std::string& name, int64_t n) {
    total += n;
    if (name.find("embeddings") != std::string::npos || name.find(".wte.") != std::string::npos ||
        name.find(".wpe.") != std::string::npos)
      emb += n;
  };
  std::vector<ParamSpec> specs;  // the language model's: BERT's with the MLM head
  if (cfg.model.family == "gpt2") {
    specs = gpt2_param_specs(decoder_config(cfg));
  } else {
    const EncoderConfig e = encoder_config(cfg);
    specs = bert_param_specs(e);
    for (ParamSpec& p : mlm_head_param_specs(e.hidden, e.vocab, e.init_std)) specs.push_back(std::move(p));
  }
  for (const ParamSpec& p : specs) count(p.name, shape_numel(p.shape));
  fmt::print("parameters: {} ({} in embeddings, {} in the blocks and head)\n", total, emb, total - emb);
  TrainOptions opt{o.resume, o.init, true, o.quiet, o.resume_latest, o.overwrite};
  const TrainSummary s = train(cfg, opt);
  fmt::print("trained {} steps; final loss {:.4f}; checkpoint {}\n", s.steps, s.last_loss,
             s.final_checkpoint);
  return 0;
}

}  // namespace

void register_train(CLI::App& app) {
  static TrainCli o;
  CLI::App* sub =
      app.add_subcommand("train", "Train a model from a TOML config (overrides: section.key=value)");
  sub->add_option("config", o.config, "the run's TOML config")->required();
  sub->add_option("overrides", o.overrides, "section.key=value settings that replace the file's");
  CLI::Option* resume = add_resume_options(sub, o.resume, o.overwrite);
  CLI::Option* init =
      sub->add_option("--init", o.init, "start a new run from this checkpoint's weights")->excludes(resume);
  sub->add_flag("--quiet", o.quiet, "no per-step log lines");
  sub->callback([resume, init] {
    o.resume_latest = resume->count() > 0 && o.resume.empty();
    o.init_given = init->count() > 0;
  });
  const auto run = [] { return run_train(o); };
  add_command(sub, run, Ranks::every);  // data-parallel (docs/distributed.md)
}

}  // namespace saobp::cli
