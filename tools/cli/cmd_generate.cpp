// `saobp generate --checkpoint DIR (--prompt TEXT | --prompts FILE | --ids 1,2,3)`: text from a
// causal decoder's checkpoint (src/train/generate.h): greedy or sampled (temperature, top-k,
// top-p, seed), up to --max-new-tokens, stopping at the tokenizer's end of text; prints each
// continuation and its speed, with --out writes them as JSON lines, and with --logits the logits
// of every position that went through the model (to compare with `saobp inspect`).
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/fs.h"
#include "data/unicode.h"
#include "model/safetensors.h"
#include "train/analysis.h"
#include "train/checkpoint.h"
#include "train/generate.h"
#include "train/task.h"

namespace saobp::cli {

namespace {

struct GenerateCli {
  std::string checkpoint, prompt, prompts, ids, out, logits, device;
  int64_t max_new_tokens = 64;
  bool no_cache = false;
  SamplingOptions sampling;
  std::vector<std::string> overrides;
  CLI::Option *prompt_opt = nullptr, *prompts_opt = nullptr, *ids_opt = nullptr;
};

// One prompt per line of `path` (the line's text without its end of line, "\r\n" too); a line
// that is not UTF-8 is an error naming the file and the line.
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const size_t bad = uni::find_invalid_utf8(line); bad != std::string_view::npos)
      fail("generate", "{}:{}: invalid UTF-8 at byte {} of the line (--prompts)", path, lines.size() + 1,
           bad);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  if (lines.empty()) fail("generate", "{}: no prompt (the file is empty)", path);
  return lines;
}

int run_generate(const GenerateCli& o) {
  const int given = (o.prompt_opt->count() > 0) + (o.prompts_opt->count() > 0) + (o.ids_opt->count() > 0);
  if (given != 1) fail("generate", "give exactly one of --prompt, --prompts and --ids ({} given)", given);
  if (!o.sampling.greedy) o.sampling.validate();
  refuse_output_over_inputs(o.out, "--out", {o.checkpoint, o.prompts, o.logits});
  refuse_output_over_inputs(o.logits, "--logits", {o.checkpoint, o.prompts});
  RunConfig cfg;
  const std::unique_ptr<Task> task =
      load_checkpoint_task(o.checkpoint, with_device(o.overrides, o.device), cfg, "generate");
  if (cfg.model.family != "gpt2")
    fail("generate",
         "{} is a {} model: generation needs a causal decoder (model.family = \"gpt2\"); an encoder's every "
         "position attends to later ones",
         o.checkpoint, cfg.model.family);
  Body* body = task->lm_body();
  LmHead* head = task->lm_head();
  if (!body || !head)
    fail("generate", "{} holds a task head (data.kind = \"{}\"), not a language model", o.checkpoint,
         cfg.data.kind);
  const Tokenizer* tok = task->tokenizer();
  // The prompts as ids. An empty text starts from the end-of-text token, which GPT-2's tokenizer
  // also uses as the beginning of a text.
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> prompts;
  if (o.ids_opt->count() > 0) {
    prompts.push_back(parse_ids("--ids", o.ids));
    texts.push_back(o.ids);
  } else {
    if (!tok)
      fail("generate", "{} has no tokenizer (a synthetic-data run): give the prompt as --ids", o.checkpoint);
    if (o.prompt_opt->count() == 0) {
      texts = read_prompts(o.prompts);
    } else if (const size_t bad = uni::find_invalid_utf8(o.prompt); bad != std::string_view::npos) {
      fail("generate", "--prompt: invalid UTF-8 at byte {} of the text", bad);
    } else {
      texts = {o.prompt};
    }
    for (const std::string& t : texts) {
      std::vector<int32_t> ids = tok->encode(t);
      if (ids.empty()) {
        if (tok->special().eos < 0)
          fail("generate", "an empty prompt needs an end-of-text token, which this tokenizer lacks");
        ids.push_back(tok->special().eos);
      }
      prompts.push_back(std::move(ids));
    }
  }
  GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.sampling = o.sampling;
  g.eos = tok ? tok->special().eos : -1;
  g.keep_logits = !o.logits.empty();
  g.recompute = o.no_cache;
  std::vector<NamedTensor> dump;  // --logits
  auto text_of = [&](const std::vector<int32_t>& ids) {
    if (tok) return tok->decode(ids);
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
    return s;
  };
  std::string jsonl;
  int64_t total_tokens = 0;
  double total_decode = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    g.stream = i;
    const Generation r = generate(*body, *head, prompts[i], g);
    if (g.keep_logits) {
      std::vector<int32_t> fed = r.prompt;
      fed.insert(fed.end(), r.tokens.begin(), r.tokens.end());
      fed.resize(static_cast<size_t>(r.logits.size(0)));
      dump.push_back({fmt::format("prompt.{}.ids", i), Tensor::from_vector(fed, {r.logits.size(0)})});
      dump.push_back({fmt::format("prompt.{}.logits", i), r.logits});
    }
    const std::string continuation = text_of(r.tokens);
    const int64_t n = static_cast<int64_t>(r.tokens.size());
    // Tokens after the first over the time they took: the decoding speed, without the prompt's pass.
    const double rate = n > 1 && r.decode_seconds > 0 ? static_cast<double>(n - 1) / r.decode_seconds : 0.0;
    total_tokens += std::max<int64_t>(n - 1, 0);
    total_decode += r.decode_seconds;
    fmt::print("=== prompt {} of {} ({} tokens) ===\n{}{}{}\n", i + 1, prompts.size(), r.prompt.size(),
               tok ? texts[i] : texts[i] + " ->", tok ? "" : " ", continuation);
    fmt::print("--- {} new tokens, stop: {}; prompt pass {:.1f} ms, then {:.1f} tokens/s\n", n, r.stop,
               1e3 * r.prefill_seconds, rate);
    if (!o.out.empty()) {
      nlohmann::ordered_json j;
      j["prompt"] = texts[i];
      j["prompt_ids"] = r.prompt;
      j["ids"] = r.tokens;
      j["text"] = continuation;
      j["stop"] = r.stop;
      j["prefill_ms"] = 1e3 * r.prefill_seconds;
      j["tokens_per_s"] = rate;
      jsonl += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  if (prompts.size() > 1 && total_decode > 0)
    fmt::print("generate: {} prompts, {:.1f} tokens/s after the prompts' passes ({})\n", prompts.size(),
               static_cast<double>(total_tokens) / total_decode, task->params().device().str());
  if (!o.out.empty()) {
    write_file_atomic(o.out, jsonl);
    fmt::print("wrote {}\n", o.out);
  }
  if (!o.logits.empty()) {
    save_safetensors(o.logits, dump, {{"format", "saobp-generate-logits"}});
    fmt::print("wrote {}\n", o.logits);
  }
  return 0;
}

}  // namespace

void register_generate(CLI::App& app) {
  static GenerateCli g;
  CLI::App* sub = app.add_subcommand("generate", "Text from a causal decoder (GPT-2) checkpoint");
  sub->add_option("--checkpoint", g.checkpoint, "checkpoint directory (a model.family = \"gpt2\" run)")
      ->required();
  g.prompt_opt = sub->add_option("--prompt", g.prompt, "the text to continue");
  g.prompts_opt = sub->add_option("--prompts", g.prompts, "a file of prompts, one per line");
  g.ids_opt = sub->add_option("--ids", g.ids, "the prompt as token ids, comma-separated");
  sub->add_option("--max-new-tokens", g.max_new_tokens, "tokens generated at most per prompt (default 64)")
      ->check(in_range(0, 1 << 20));
  CLI::Option* greedy =
      sub->add_flag("--greedy", g.sampling.greedy, "take the most likely token (no sampling)");
  sub->add_option("--temperature", g.sampling.temperature, "divides the logits before sampling (default 1)")
      ->check(above(0))
      ->excludes(greedy);
  sub->add_option("--top-k", g.sampling.top_k, "sample among the k most likely tokens (default 0: all)")
      ->check(in_range(0, 1 << 30))
      ->excludes(greedy);
  sub->add_option("--top-p", g.sampling.top_p, "then among the fewest whose mass reaches p (default 1)")
      ->check(in_range(0, 1))
      ->excludes(greedy);
  sub->add_option("--seed", g.sampling.seed, "seed of the draws (default 42)");
  add_device_option(sub, g.device);
  sub->add_flag("--no-cache", g.no_cache,
                "the baseline: a full forward over the whole sequence for every token (same tokens, slower)");
  sub->add_option("--out", g.out, "also write the generations as JSON lines to this file")
      ->check(non_empty_path());
  sub->add_option(
         "--logits", g.logits,
         "also write every position's logits (f64) and ids as safetensors: prompt.N.logits, prompt.N.ids")
      ->check(non_empty_path());
  sub->add_option("overrides", g.overrides, "section.key=value settings on the checkpoint's config");
  add_command(sub, [] { return run_generate(g); });
}

}  // namespace saobp::cli
