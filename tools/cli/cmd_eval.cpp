// `saobp eval --checkpoint DIR`: a checkpoint's held-out loss, accuracy and perplexity;
// with --task, a benchmark's official metrics into results.json (run_benchmark_eval,
// cmd_finetune.cpp).
#include "cli/commands.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace saobp::cli {

void register_eval(CLI::App& app) {
  static std::string ckpt, task, data, out, device;
  static bool zero_shot = false;
  static std::vector<std::string> eval_overrides;
  CLI::App* ev = app.add_subcommand(
      "eval",
      "A checkpoint's held-out loss, accuracy and perplexity; with --task, a benchmark's official metrics");
  ev->add_option("--checkpoint", ckpt,
                 "checkpoint directory (ours or a Hugging Face model folder with --task)")
      ->required();
  ev->add_option("--task", task, "a benchmark (saobp finetune --help lists them): writes results.json");
  ev->add_option("--data", data, "the benchmark's files (with --task)");
  ev->add_flag("--zero-shot", zero_shot,
               "score the candidates by a decoder's log-likelihood (race/*, hellaswag, boolq)");
  ev->add_option("--out", out, "results.json path (with --task; default runs/eval/<task>/results.json)")
      ->check(non_empty_path());
  add_device_option(ev, device);
  ev->add_option("overrides", eval_overrides, "section.key=value settings (e.g. train.eval_batches=100)");
  add_command(ev, [] {
    const std::vector<std::string> ov = with_device(eval_overrides, device);
    refuse_output_over_inputs(out, "--out", {ckpt, data});
    if (!task.empty()) return run_benchmark_eval(ckpt, task, data, zero_shot, ov, out);
    if (zero_shot || !data.empty() || !out.empty())
      throw CLI::ValidationError("--data, --zero-shot and --out go with --task");
    evaluate_checkpoint(ckpt, ov, true);
    return 0;
  });
}

}  // namespace saobp::cli
