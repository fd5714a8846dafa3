// cost_table of src/study/cost.h.
#include "study/cost.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "train/flops.h"

namespace saobp::study {

nlohmann::json cost_table(const RunConfig& cfg, const std::vector<std::string>& variants,
                          const std::vector<std::string>& bench_files) {
  SAOBP_CHECK(!variants.empty(), "cost", "no attention variant given");
  const TrainSection& tc = cfg.train;
  const bool encoder = cfg.model.family == "bert";
  // A training step sees grad_accum micro-batches; an inference batch is one batch of B sequences.
  const double tokens = static_cast<double>(tc.batch_size * tc.seq_len * tc.grad_accum);
  const double batch_tokens = static_cast<double>(tc.batch_size * tc.seq_len);
  const double rows = encoder ? cfg.data.mlm_probability * tokens : tokens;
  const double batch_rows = encoder ? cfg.data.mlm_probability * batch_tokens : batch_tokens;
  const Head head = encoder ? Head::mlm : Head::lm;
  std::vector<nlohmann::json> benches;
  for (const std::string& f : bench_files) {
    nlohmann::json j;
    try {
      j = read_json_file(f, "cost");
    } catch (const nlohmann::json::exception& e) {
      fail("cost", "{}: {}", f, e.what());
    }
    if (!j.is_object()) fail("cost", "{}: a bench file holds a JSON object, not {}", f, j.type_name());
    // The keys that say what was measured, each of its type (a bench file of `saobp bench --json`).
    const JsonFields b(j, f, "cost");
    const std::string family = b.string("family"), mode = b.string("mode", "");
    const int64_t batch_size = b.integer("batch_size"), seq_len = b.integer("seq_len");
    (void)b.string("attention");
    if (family != cfg.model.family || batch_size != tc.batch_size || seq_len != tc.seq_len)
      fail("cost", "{}: a bench of {} B={} T={}, not of this config's {} B={} T={}", f, family, batch_size,
           seq_len, cfg.model.family, tc.batch_size, tc.seq_len);
    if (mode == "inference" &&
        !(j.contains("batch") && j["batch"].is_object() && j["batch"].contains("ms_median") &&
          j.contains("single") && j["single"].is_object() && j["single"].contains("ms_median")))
      fail("cost", "{}: an inference bench without its \"batch\" and \"single\" figures (ms_median)", f);
    // Every figure the table takes is a positive number (or absent where optional).
    auto figure = [&](const nlohmann::json& obj, const std::string& where, const char* key, bool required) {
      const auto it = obj.find(key);
      if (it == obj.end()) {
        if (required) fail("cost", "{}: {}{} is missing", f, where, key);
        return;
      }
      if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
        fail("cost", "{}: {}{} is {}, not a positive number", f, where, key, json_excerpt(*it));
    };
    if (mode == "inference") {
      figure(j["batch"], "batch.", "ms_median", true);
      figure(j["batch"], "batch.", "tokens_per_s", false);
      figure(j["single"], "single.", "ms_median", true);
    } else {
      figure(j, "", "ms_per_step_median", true);
      figure(j, "", "tokens_per_s", false);
      figure(j, "", "gflops", false);
    }
    benches.push_back(j);
  }
  nlohmann::json out = {{"family", cfg.model.family},         {"preset", cfg.model.preset},
                        {"batch_size", tc.batch_size},        {"seq_len", tc.seq_len},
                        {"tokens_per_step", tokens},          {"head_rows", rows},
                        {"tokens_per_batch", batch_tokens},   {"batch_head_rows", batch_rows},
                        {"variants", nlohmann::json::array()}};
  double original_train = NAN, original_infer = NAN;
  for (const std::string& name : variants) {
    RunConfig c = cfg;
    c.model.attention.variant = parse_variant(name);
    const std::vector<FlopTerm> train = step_flops(c, head, tokens, rows, 0);
    const std::vector<FlopTerm> infer = forward_flops(c, head, batch_tokens, batch_rows, 0);
    nlohmann::json terms = nlohmann::json::array();
    for (const FlopTerm& t : train)
      terms.push_back({{"name", t.name}, {"formula", t.formula}, {"flops", t.flops}});
    nlohmann::json v = {{"attention", variant_name(c.model.attention.variant)},
                        {"train_flops_per_step", total_flops(train)},
                        {"train_flop_terms", terms},
                        {"inference_flops_per_batch", total_flops(infer)},
                        {"inference_flops_per_token", total_flops(infer) / batch_tokens},
                        {"ms_per_step", nullptr},
                        {"tokens_per_s", nullptr},
                        {"gflops", nullptr},
                        {"inference_ms_per_batch", nullptr},
                        {"inference_tokens_per_s", nullptr},
                        {"latency_ms", nullptr}};
    if (c.model.attention.variant == AttnVariant::original)
      original_train = total_flops(train), original_infer = total_flops(infer);
    // A training bench (`saobp bench --json`) gives the step; an inference bench (`saobp bench
    // --inference --json`) the pass at B (throughput) and at B = 1 (latency). The last file of
    // each kind for a variant wins.
    for (const nlohmann::json& b : benches) {
      if (b["attention"] != v["attention"]) continue;
      if (b.contains("mode") && b["mode"] == "inference") {
        v["inference_ms_per_batch"] = b["batch"]["ms_median"];
        v["inference_tokens_per_s"] = b["batch"].value("tokens_per_s", nlohmann::json());
        v["latency_ms"] = b["single"]["ms_median"];
      } else {
        v["ms_per_step"] = b["ms_per_step_median"];
        v["tokens_per_s"] = b.value("tokens_per_s", nlohmann::json());
        v["gflops"] = b.value("gflops", nlohmann::json());
      }
    }
    out["variants"].push_back(v);
  }
  // The FLOPs a variant adds, as a fraction of original's (null when original is not in the table).
  auto extra = [](const nlohmann::json& flops, double original) {
    return std::isnan(original) ? nlohmann::json() : nlohmann::json(flops.get<double>() / original - 1);
  };
  for (nlohmann::json& v : out["variants"]) {
    v["extra_train_flops"] = extra(v["train_flops_per_step"], original_train);
    v["extra_inference_flops"] = extra(v["inference_flops_per_batch"], original_infer);
  }
  return {{"cost_table", out}};
}

std::string cost_markdown(const nlohmann::json& table) {
  const nlohmann::json& t = table["cost_table"];
  std::string s = fmt::format(
      "{} {}, B = {}, T = {} (training: {} tokens per step, head on {} rows; inference: {} tokens per batch, "
      "latency at B = 1)\n\n"
      "| attention | train GFLOP/step | vs original | train ms/step | train tokens/s | "
      "inference GFLOP/batch | vs original | inference FLOP/token | inference ms/batch | "
      "inference tokens/s | latency ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      t["family"].get<std::string>(), t["preset"].get<std::string>(), t["batch_size"].get<int64_t>(),
      t["seq_len"].get<int64_t>(), t["tokens_per_step"].get<double>(), t["head_rows"].get<double>(),
      t["tokens_per_batch"].get<double>());
  auto opt = [](const nlohmann::json& v, const char* f) {
    return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
  };
  auto percent = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:+.1f}%", 100 * v.get<double>()) : std::string("-");
  };
  for (const nlohmann::json& v : t["variants"])
    s += fmt::format("| {} | {:.4g} | {} | {} | {} | {:.4g} | {} | {:.4g} | {} | {} | {} |\n",
                     v["attention"].get<std::string>(), v["train_flops_per_step"].get<double>() / 1e9,
                     percent(v["extra_train_flops"]), opt(v["ms_per_step"], "{:.1f}"),
                     opt(v["tokens_per_s"], "{:.0f}"), v["inference_flops_per_batch"].get<double>() / 1e9,
                     percent(v["extra_inference_flops"]), v["inference_flops_per_token"].get<double>(),
                     opt(v["inference_ms_per_batch"], "{:.2f}"), opt(v["inference_tokens_per_s"], "{:.0f}"),
                     opt(v["latency_ms"], "{:.2f}"));
  return s;
}

}  // namespace saobp::study
