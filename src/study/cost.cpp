// cost_table of src/study/cost.h.
#include "study/cost.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/fs.h"
#include "train/flops.h"

namespace saobp::study {

nlohmann::json cost_table(const RunConfig& cfg, const std::vector<std::string>& variants,
                          const std::vector<std::string>& bench_files) {
  SAOBP_CHECK(!variants.empty(), "cost", "no attention variant given");
  const TrainSection& tc = cfg.train;
  const bool encoder = cfg.model.family == "bert";
  const double tokens = static_cast<double>(tc.batch_size * tc.seq_len * tc.grad_accum);
  const double rows = encoder ? cfg.data.mlm_probability * tokens : tokens;
  const Head head = encoder ? Head::mlm : Head::lm;
  std::vector<nlohmann::json> benches;
  for (const std::string& f : bench_files) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(f));
    } catch (const nlohmann::json::exception& e) {
      fail("cost", "{}: {}", f, e.what());
    }
    if (j.value("family", "") != cfg.model.family || j.value("batch_size", int64_t{-1}) != tc.batch_size ||
        j.value("seq_len", int64_t{-1}) != tc.seq_len || !j.contains("attention"))
      fail("cost", "{}: a bench of {} B={} T={}, not of this config's {} B={} T={}", f,
           j.value("family", "?"), j.value("batch_size", int64_t{-1}), j.value("seq_len", int64_t{-1}),
           cfg.model.family, tc.batch_size, tc.seq_len);
    benches.push_back(j);
  }
  nlohmann::json out = {{"family", cfg.model.family},         {"preset", cfg.model.preset},
                        {"batch_size", tc.batch_size},        {"seq_len", tc.seq_len},
                        {"tokens_per_step", tokens},          {"head_rows", rows},
                        {"variants", nlohmann::json::array()}};
  double original_train = NAN;
  for (const std::string& name : variants) {
    RunConfig c = cfg;
    c.model.attention = parse_variant(name);
    const std::vector<FlopTerm> train = step_flops(c, head, tokens, rows, 0);
    const std::vector<FlopTerm> infer = forward_flops(c, head, tokens, rows, 0);
    nlohmann::json terms = nlohmann::json::array();
    for (const FlopTerm& t : train)
      terms.push_back({{"name", t.name}, {"formula", t.formula}, {"flops", t.flops}});
    nlohmann::json v = {{"attention", variant_name(c.model.attention)},
                        {"train_flops_per_step", total_flops(train)},
                        {"train_flop_terms", terms},
                        {"inference_flops_per_batch", total_flops(infer)},
                        {"inference_flops_per_token", total_flops(infer) / tokens},
                        {"ms_per_step", nullptr},
                        {"tokens_per_s", nullptr},
                        {"gflops", nullptr}};
    if (c.model.attention == AttnVariant::original) original_train = total_flops(train);
    for (const nlohmann::json& b : benches)
      if (b["attention"] == v["attention"] && b.contains("ms_per_step_median")) {
        v["ms_per_step"] = b["ms_per_step_median"];
        v["tokens_per_s"] = b.value("tokens_per_s", nlohmann::json());
        v["gflops"] = b.value("gflops", nlohmann::json());
      }
    out["variants"].push_back(v);
  }
  for (nlohmann::json& v : out["variants"])
    v["extra_train_flops"] =
        std::isnan(original_train)
            ? nlohmann::json()
            : nlohmann::json(v["train_flops_per_step"].get<double>() / original_train - 1);
  return {{"cost_table", out}};
}

std::string cost_markdown(const nlohmann::json& table) {
  const nlohmann::json& t = table["cost_table"];
  std::string s = fmt::format(
      "{} {}, B = {}, T = {} ({} tokens per step, head on {} rows)\n\n"
      "| attention | train GFLOP/step | vs original | inference GFLOP/batch | inference FLOP/token | "
      "ms/step | tokens/s |\n|---|---|---|---|---|---|---|\n",
      t["family"].get<std::string>(), t["preset"].get<std::string>(), t["batch_size"].get<int64_t>(),
      t["seq_len"].get<int64_t>(), t["tokens_per_step"].get<double>(), t["head_rows"].get<double>());
  auto opt = [](const nlohmann::json& v, const char* f) {
    return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
  };
  for (const nlohmann::json& v : t["variants"])
    s += fmt::format("| {} | {:.4g} | {} | {:.4g} | {:.4g} | {} | {} |\n", v["attention"].get<std::string>(),
                     v["train_flops_per_step"].get<double>() / 1e9,
                     (v["extra_train_flops"].is_number()
                          ? fmt::format("{:+.1f}%", 100 * v["extra_train_flops"].get<double>())
                          : std::string("-")),
                     v["inference_flops_per_batch"].get<double>() / 1e9,
                     v["inference_flops_per_token"].get<double>(), opt(v["ms_per_step"], "{:.1f}"),
                     opt(v["tokens_per_s"], "{:.0f}"));
  return s;
}

}  // namespace saobp::study
