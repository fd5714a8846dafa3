// DiagnosticsReport's writers (src/attention/diagnostics.h): the JSON report and the per-layer,
// per-head and per-position CSV tables `saobp analyze` writes (formats: docs/diagnostics.md).
#include <fmt/format.h>

#include <cmath>

#include "attention/diagnostics.h"

namespace saobp {

// ---- output --------------------------------------------------------------------------------------

namespace {

// NaN -> null in JSON (nlohmann writes non-finite numbers as null anyway; explicit here).
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json head_json(const HeadDiagnostics& d) {
  nlohmann::json pos = nlohmann::json::array();
  for (double x : d.position_entropy) pos.push_back(num(x));
  return {{"entropy", num(d.entropy)},
          {"gtd", num(d.gtd)},
          {"indirect_entropy", num(d.indirect_entropy)},
          {"sparsity", num(d.sparsity)},
          {"clustering", num(d.clustering)},
          {"clustering_nan_samples", d.clustering_nan_samples},
          {"clustering_undefined_nodes", d.clustering_undefined_nodes},
          {"betweenness", num(d.betweenness)},
          {"peaked_fraction", num(d.peaked_fraction)},
          {"sinky_rate", num(d.sinky_rate)},
          {"sink_value_norm", num(d.sink_value_norm)},
          {"other_value_norm", num(d.other_value_norm)},
          {"sink_tokens", d.sink_tokens},
          {"other_tokens", d.other_tokens},
          {"sinky_head_value_norm", num(d.sinky_head_value_norm)},
          {"other_head_value_norm", num(d.other_head_value_norm)},
          {"sinky_head_tokens", d.sinky_head_tokens},
          {"other_head_tokens", d.other_head_tokens},
          {"diagonal", num(d.diagonal)},
          {"previous", num(d.previous)},
          {"position_entropy", pos}};
}

nlohmann::json map_json(const MapDiagnostics& md) {
  nlohmann::json layers = nlohmann::json::array(), heads = nlohmann::json::array(),
                 cg = nlohmann::json::array(), ci = nlohmann::json::array(), last = nlohmann::json::array();
  for (const auto& y : md.layers) layers.push_back(head_json(y));
  for (const auto& hl : md.heads) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& d : hl) row.push_back(head_json(d));
    heads.push_back(row);
  }
  for (double x : md.cross_gtd) cg.push_back(num(x));
  for (double x : md.cross_indirect_entropy) ci.push_back(num(x));
  for (double x : md.last_layer_head_entropy) last.push_back(num(x));
  return {{"layers", layers},
          {"heads", heads},
          {"cross_layer", {{"gtd", cg}, {"indirect_entropy", ci}}},
          {"last_layer_head_entropy", last}};
}

nlohmann::json groups_json(const MapDiagnostics& md, const std::vector<double>& skip_rate, int64_t group) {
  nlohmann::json out = nlohmann::json::array();
  for (const SinkGroup& g : sink_groups(md, skip_rate, group))
    out.push_back({{"first_layer", g.first_layer},
                   {"last_layer", g.last_layer},
                   {"sinky_share", num(g.sinky_share)},
                   {"skip_share", num(g.skip_share)},
                   {"sink_value_norm", num(g.sink_value_norm)},
                   {"other_value_norm", num(g.other_value_norm)},
                   {"value_norm_delta", num(g.value_norm_delta)},
                   {"sink_tokens", g.sink_tokens},
                   {"other_tokens", g.other_tokens},
                   {"sinky_head_value_norm", num(g.sinky_head_value_norm)},
                   {"other_head_value_norm", num(g.other_head_value_norm)},
                   {"sinky_head_tokens", g.sinky_head_tokens},
                   {"other_head_tokens", g.other_head_tokens}});
  return out;
}

std::string csv_num(double x) { return std::isfinite(x) ? fmt::format("{:.10g}", x) : std::string("nan"); }

constexpr const char* kMetricHeader =
    "entropy,gtd,indirect_entropy,sparsity,clustering,clustering_nan_samples,clustering_undefined_nodes,"
    "betweenness,peaked_fraction,sinky_rate,sink_value_norm,other_value_norm,sink_tokens,other_tokens,"
    "diagonal,"
    "previous";

std::string csv_metrics(const HeadDiagnostics& d) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_num(d.entropy), csv_num(d.gtd),
                     csv_num(d.indirect_entropy), csv_num(d.sparsity), csv_num(d.clustering),
                     d.clustering_nan_samples, d.clustering_undefined_nodes, csv_num(d.betweenness),
                     csv_num(d.peaked_fraction), csv_num(d.sinky_rate), csv_num(d.sink_value_norm),
                     csv_num(d.other_value_norm), d.sink_tokens, d.other_tokens, csv_num(d.diagonal),
                     csv_num(d.previous));
}

const char* map_name(int m) { return m == 0 ? "A" : "B"; }

}  // namespace

nlohmann::json DiagnosticsReport::to_json() const {
  nlohmann::json j = {{"options", options.to_json()},
                      {"samples", samples},
                      {"empty_samples", empty_samples},
                      {"layers", layers},
                      {"heads", heads},
                      {"has_values", has_values},
                      {"position_count", position_count},
                      {"attn", map_json(attn)},
                      {"probs", map_json(probs)},
                      {"skip_rate", skip_rate},
                      {"sink_groups",
                       {{"layer_group", options.layer_group},
                        {"attn", groups_json(attn, skip_rate, options.layer_group)},
                        {"probs", groups_json(probs, skip_rate, options.layer_group)}}}};
  if (rope) j["rope"] = rope->to_json();
  if (!data.is_null()) j["data"] = data;
  return j;
}

std::string DiagnosticsReport::layers_csv() const {
  std::string s = fmt::format("map,layer,{},cross_gtd,cross_indirect_entropy\n", kMetricHeader);
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.layers.size(); ++l)
      s += fmt::format("{},{},{},{},{}\n", map_name(m), l, csv_metrics(md.layers[l]),
                       csv_num(md.cross_gtd[l]), csv_num(md.cross_indirect_entropy[l]));
  }
  return s;
}

std::string DiagnosticsReport::heads_csv() const {
  std::string s = fmt::format("map,layer,head,{}\n", kMetricHeader);
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.heads.size(); ++l)
      for (size_t h = 0; h < md.heads[l].size(); ++h)
        s += fmt::format("{},{},{},{}\n", map_name(m), l, h, csv_metrics(md.heads[l][h]));
  }
  return s;
}

std::string DiagnosticsReport::positions_csv() const {
  std::string s = "map,layer,head,position,entropy,samples\n";
  for (int m = 0; m < 2; ++m) {
    const MapDiagnostics& md = m == 0 ? attn : probs;
    for (size_t l = 0; l < md.heads.size(); ++l) {
      for (size_t h = 0; h < md.heads[l].size(); ++h)
        for (size_t p = 0; p < md.heads[l][h].position_entropy.size(); ++p)
          s += fmt::format("{},{},{},{},{},{}\n", map_name(m), l, h, p,
                           csv_num(md.heads[l][h].position_entropy[p]), position_count[p]);
      for (size_t p = 0; p < md.layers[l].position_entropy.size(); ++p)
        s += fmt::format("{},{},mean,{},{},{}\n", map_name(m), l, p,
                         csv_num(md.layers[l].position_entropy[p]), position_count[p]);
    }
  }
  return s;
}

std::string DiagnosticsReport::per_sample_csv() const {
  std::string s = "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n";
  for (const SampleDiagnostics& d : per_sample)
    s += fmt::format("{},{},{},{},{},{},{},{},{}\n", d.sample, d.layer, map_name(d.map), d.head, d.tokens,
                     csv_num(d.entropy), csv_num(d.gtd), csv_num(d.clustering), csv_num(d.betweenness));
  return s;
}

}  // namespace saobp
