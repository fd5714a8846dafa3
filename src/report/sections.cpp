#include "report/sections.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "report/svg.h"

namespace saobp::report {

namespace {

// "#rrggbb" moved a fraction t of the way to white.
std::string tint(const std::string& hex, double t) {
  int rgb[3];
  for (int k = 0; k < 3; ++k) {
    const double c = static_cast<double>(std::stoul(hex.substr(1 + 2 * k, 2), nullptr, 16));
    rgb[k] = static_cast<int>(std::lround(c + t * (255.0 - c)));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}
std::string lighter(const std::string& hex) { return tint(hex, 0.5); }

std::vector<double> iota(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string fmt_num(double v, const char* f = "{:.4f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("–");
}

double last_finite(const std::vector<double>& v) {
  for (auto it = v.rbegin(); it != v.rend(); ++it)
    if (std::isfinite(*it)) return *it;
  return kNaN;
}

}  // namespace

void Page::section(const char* id, const std::string& title) {
  html += fmt::format("<h2 id=\"{}\">{}. {}</h2>\n", id, ++sections, svg::escape(title));
}
void Page::add(const std::string& id, const std::string& svg) {
  figures.push_back(id);
  html += "<div class=\"fig\">" + svg + "</div>\n";
}
void Page::caption(const std::string& text) {
  html += "<p class=\"caption\">" + svg::escape(text) + "</p>\n";
}

void header(Page& p, const std::vector<Run>& runs, size_t evaluations, const ReportOptions& opt) {
  p.html += "<h1>saobp training report</h1>\n";
  const std::string evals =
      evaluations ? fmt::format(" &middot; {} evaluation result(s) without a run", evaluations) : "";
  if (runs.empty()) {
    p.html += fmt::format("<p class=\"meta\">Generated {}{}</p>\n", utc_now(), evals);
    return;
  }
  p.html += fmt::format(
      "<p class=\"meta\">Generated {} &middot; {} run(s){} &middot; end-of-training metrics over {} "
      "validation samples (unless read from analysis.json) &middot; heatmap sample {}</p>\n",
      utc_now(), runs.size(), evals, opt.samples, opt.sample_index);
  p.html +=
      "<table><tr><th></th><th>run</th><th>family</th><th>size</th><th>attention</th><th>&lambda;</th>"
      "<th>steps</th><th>final train loss</th><th>final eval loss</th><th>eval accuracy</th>"
      "<th>Fig. 4 metrics</th><th>directory</th></tr>\n";
  for (const Run& r : runs) {
    const ModelSection& m = r.cfg.model;
    const double steps_done = r.metrics.step.empty() ? kNaN : r.metrics.step.back();
    p.html += fmt::format(
        "<tr><td><span class=\"swatch\" style=\"background:{}\"></span></td><td><b>{}</b></td><td>{}</td>"
        "<td>{}: L={} H={} NH={} FF={}</td><td>{}</td><td>{}</td><td>{} / "
        "{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td><code>{}</code></td></tr>\n",
        r.color, svg::escape(r.name), svg::escape(m.family), svg::escape(m.preset), m.layers, m.hidden,
        m.heads, m.intermediate, svg::escape(r.variant),
        r.identical ? std::string("–") : fmt_num(r.lambda, "{:g}"), fmt_num(steps_done, "{:.0f}"),
        r.cfg.train.max_steps, fmt_num(last_finite(r.metrics.loss)),
        fmt_num(last_finite(r.metrics.eval_loss)), fmt_num(last_finite(r.metrics.eval_accuracy)),
        svg::escape(r.analysis_from), svg::escape(r.dir));
  }
  p.html += "</table>\n";
}

void training_curves(Page& p, const std::vector<Run>& runs) {
  p.section("training", "Training curves");
  p.html += "<div class=\"row\">\n";
  svg::LineChart loss{"fig-train-loss", "Training loss", "step", "loss", {}};
  svg::LineChart eval{"fig-eval-loss", "Eval loss", "step", "eval loss", {}};
  svg::LineChart lr{"fig-lr", "Learning rate", "step", "learning rate", {}};
  for (const Run& r : runs) {
    loss.series.push_back({r.label, r.color, r.metrics.step, r.metrics.loss});
    eval.series.push_back({r.label, r.color, r.metrics.eval_step, r.metrics.eval_loss, false, true});
    lr.series.push_back({r.label, r.color, r.metrics.step, r.metrics.lr});
  }
  p.add(loss.id, svg::line_chart(loss));
  p.add(eval.id, svg::line_chart(eval));
  p.add(lr.id, svg::line_chart(lr));
  p.html += "</div>\n";
}

namespace {

// A name usable in an element id: letters, digits and '_' kept, anything else '-'.
std::string id_part(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '-';
  return out;
}

}  // namespace

// Fine-tuning runs (eval_metrics in metrics.jsonl): one chart per (split, metric), a line per run
// over the step, epoch ends marked. Nothing when no run has them.
void finetune_curves(Page& p, const std::vector<Run>& runs) {
  std::set<MetricKey> keys;
  for (const Run& r : runs)
    for (const auto& [key, v] : r.metrics.eval_metrics) keys.insert(key);
  if (keys.empty()) return;
  p.section("finetune", "Fine-tuning curves");
  p.html += "<div class=\"row\">\n";
  bool epochs = false;
  for (const MetricKey& key : keys) {
    const auto& [split, metric] = key;
    const std::string id = "fig-ft-" + id_part(split) + "-" + id_part(metric);
    svg::LineChart c{id, split + ": " + metric, "step", metric, {}};
    for (const Run& r : runs) {
      auto it = r.metrics.eval_metrics.find(key);
      if (it == r.metrics.eval_metrics.end()) continue;
      c.series.push_back({r.label, r.color, r.metrics.eval_step, it->second, false, true});
      for (size_t i = 0; i < r.metrics.eval_epoch.size(); ++i)
        if (std::isfinite(r.metrics.eval_epoch[i]))
          c.marks.push_back(
              {r.metrics.eval_step[i], fmt::format("e{:.0f}", r.metrics.eval_epoch[i]), r.color});
    }
    epochs = epochs || !c.marks.empty();
    p.add(id, svg::line_chart(c));
  }
  p.html += "</div>\n";
  p.caption(
      std::string("The eval_metrics of every evaluation in metrics.jsonl, one chart per split and metric "
                  "(SQuAD's exact match and F1 in percent, the others as fractions).") +
      (epochs ? " Dotted verticals mark the ends of epochs (e1, e2, ... in the run's color)." : ""));
}

namespace {

// A metric value: fractions with 4 decimals, percentages and perplexities with 2.
std::string fmt_metric(double v) { return fmt_num(v, std::abs(v) < 10 ? "{:.4f}" : "{:.2f}"); }

std::string json_text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "–";
  return svg::escape(it->is_string() ? it->get<std::string>() : it->dump());
}

// {"<split>": n, ...} as "split n, split n".
std::string split_counts(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object() || it->empty()) return "–";
  std::string out;
  for (const auto& [split, n] : it->items())
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", svg::escape(split),
                       n.is_number() ? fmt_num(n.get<double>(), "{:.0f}") : svg::escape(n.dump()));
  return out;
}

}  // namespace

// One row per results.json (fine-tuning runs and `saobp eval --task` outputs), one column per
// (split, metric) of their final "metrics". Nothing when there is none.
void results_table(Page& p, const std::vector<Result>& results) {
  if (results.empty()) return;
  p.section("results", "Fine-tuning and evaluation results");
  std::map<std::string, std::set<std::string>> columns;  // split -> metrics
  for (const Result& r : results)
    for (const auto& [key, v] : split_metrics(r.j["metrics"])) columns[key.first].insert(key.second);
  const char* span = columns.empty() ? "" : " rowspan=\"2\"";
  p.html += "<table class=\"results\"><tr>";
  for (const char* h : {"", "run", "task", "attention", "family", "steps"})
    p.html += fmt::format("<th{}>{}</th>", span, h);
  for (const auto& [split, metrics] : columns)
    p.html += fmt::format("<th colspan=\"{}\">{}</th>", metrics.size(), svg::escape(split));
  for (const char* h : {"examples", "truncated", "file"}) p.html += fmt::format("<th{}>{}</th>", span, h);
  p.html += "</tr>\n";
  if (!columns.empty()) {
    p.html += "<tr>";
    for (const auto& [split, metrics] : columns)
      for (const std::string& m : metrics) p.html += "<th>" + svg::escape(m) + "</th>";
    p.html += "</tr>\n";
  }
  std::vector<std::string> skipped;
  for (const Result& r : results) {
    const nlohmann::json& j = r.j;
    const std::string swatch =
        r.color.empty() ? "" : fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", r.color);
    std::string task = json_text(j, "task");
    if (j.contains("zero_shot") && j["zero_shot"] == true) task += " (zero-shot)";
    p.html += fmt::format("<tr><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                          swatch, svg::escape(r.name), task, json_text(j, "attention"),
                          json_text(j, "family"), fmt_num(number(j, "steps"), "{:.0f}"));
    const nlohmann::json& m = j["metrics"];
    for (const auto& [split, metrics] : columns)
      for (const std::string& key : metrics) {
        double v = kNaN;
        if (m.contains(split) && m[split].is_object()) v = number(m[split], key.c_str());
        p.html += "<td class=\"num\">" + fmt_metric(v) + "</td>";
      }
    p.html += fmt::format("<td>{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
                          split_counts(j, "examples"), split_counts(j, "truncated"), svg::escape(r.path));
    if (auto sk = j.find("skipped_rows"); sk != j.end() && sk->is_object())
      for (const auto& [split, s] : sk->items()) {
        const double rows = s.is_object() ? number(s, "rows") : kNaN;
        if (!(rows > 0)) continue;
        std::string first;
        if (s.contains("first") && s["first"].is_array() && !s["first"].empty() && s["first"][0].is_string())
          first = " (first: " + s["first"][0].get<std::string>() + ")";
        skipped.push_back(fmt::format("{} {} {:.0f}{}", r.name, split, rows, first));
      }
  }
  p.html += "</table>\n";
  p.caption(
      "Final metrics of each results.json (`saobp finetune`, `saobp eval --task`): SQuAD's exact match and "
      "F1 in "
      "percent, the others as fractions. Examples: examples read per split; truncated: examples cut to the "
      "model's length.");
  if (!skipped.empty()) p.caption(fmt::format("Malformed rows skipped: {}.", fmt::join(skipped, "; ")));
}

namespace {

std::string identical_note(const std::vector<Run>& runs) {
  std::vector<std::string> names;
  for (const Run& r : runs)
    if (r.identical) names.push_back(r.name);
  if (names.empty()) return "";
  return fmt::format(" For {} (attention \"original\") A and B are identical: drawn once.",
                     fmt::join(names, ", "));
}

}  // namespace

void layer_figures(Page& p, const std::vector<Run>& runs) {
  p.section("layers", "Per-layer attention metrics at the end of training (paper Fig. 4)");
  p.html += "<div class=\"row\">\n";
  struct Metric {
    const char* id;
    const char* title;
    const char* ylabel;
    std::vector<double> LayerMetrics::*field;
  };
  const Metric metrics[] = {
      {"fig-layer-gtd", "GTD per layer", "GTD (eq. 13)", &LayerMetrics::gtd},
      {"fig-layer-indirect-entropy", "Indirect entropy per layer", "indirect entropy (nats)",
       &LayerMetrics::indirect_entropy},
      {"fig-layer-entropy", "Mean attention entropy per layer", "entropy (nats)", &LayerMetrics::entropy}};
  for (const Metric& m : metrics) {
    svg::LineChart c{m.id, m.title, "layer", m.ylabel, {}};
    c.integer_x = true;
    for (const Run& r : runs) {
      const std::vector<double>& b = r.b.*m.field;
      c.series.push_back({r.identical ? r.label : r.label + " B", r.color, iota(b.size()), b, false, true});
      if (!r.identical) {
        const std::vector<double>& a = r.a.*m.field;
        c.series.push_back({r.label + " A", r.color, iota(a.size()), a, true, true});
      }
    }
    p.add(m.id, svg::line_chart(c));
  }
  p.html += "</div>\n";
  p.caption(
      "Solid: B (the refined map); dashed: A (the softmax map of the same model). Layer means over heads and "
      "validation samples." +
      identical_note(runs));
}

void positional_heads(Page& p, const std::vector<Run>& runs) {
  p.section("positional", "Positional heads (the connection-bottleneck slides)");
  p.html += "<div class=\"row\">\n";
  svg::LineChart c{"fig-positional", "The most positional head of each layer", "layer", "mean mass", {}};
  c.integer_x = true;
  c.ymin = 0;
  c.ymax = 1;
  for (const Run& r : runs) {
    c.series.push_back(
        {r.label + " diagonal", r.color, iota(r.b.max_diagonal.size()), r.b.max_diagonal, false, true});
    c.series.push_back(
        {r.label + " previous", r.color, iota(r.b.max_previous.size()), r.b.max_previous, true, true});
  }
  p.add(c.id, svg::line_chart(c));
  p.html += "</div>\n";
  p.caption(
      "Solid: the largest mean attention of a head of the layer to the token itself (a_ii); dashed: to the "
      "token before it (a_i,i-1); B maps. Above 0.5: a diagonal or previous-token head.");
}

void rope_figures(Page& p, const std::vector<Run>& runs) {
  std::vector<const Run*> with;
  for (const Run& r : runs)
    if (r.rope) with.push_back(&r);
  if (with.empty()) return;
  p.section("rope", "Rotary positions: decay bound and frequency bands");
  p.html += "<div class=\"row\">\n";
  svg::LineChart d{
      "fig-rope-decay", "RoFormer's decay bound of |q·k|", "relative distance", "bound / bound at 0", {}};
  d.ymin = 0;
  svg::LineChart e{"fig-rope-bands",
                   "Share of |q||k| per RoPE pair (layer means)",
                   "pair i (slow to the right)",
                   "share",
                   {}};
  e.integer_x = true;
  std::string slow;
  for (const Run* r : with) {
    const RopeMetrics& m = *r->rope;
    d.series.push_back(
        {fmt::format("{} base {:g}", r->label, m.base), r->color, m.distance, m.bound, false, false});
    std::vector<double> mean(m.wavelength.size(), 0.0);
    for (const auto& layer : m.energy)
      for (size_t i = 0; i < mean.size(); ++i) mean[i] += layer[i] / static_cast<double>(m.energy.size());
    e.series.push_back({r->label, r->color, iota(mean.size()), mean, false, true});
    slow += fmt::format("{}{}:", slow.empty() ? "" : "; ", r->label);
    for (double x : m.slow_share) slow += fmt::format(" {:.2f}", x);
  }
  p.add(d.id, svg::line_chart(d));
  p.add(e.id, svg::line_chart(e));
  p.html += "</div>\n";
  p.caption(
      "Left: the relative upper bound of a head's q·k against the distance between the tokens (it depends on "
      "rope_base and the head size only). Right: Σ over heads of the mean norm of pair i of q times that of "
      "k, "
      "as a share of the layer's sum, averaged over layers; pair i turns by θ_i = base^(-2i/HS) per "
      "position, so "
      "the right end holds the slow pairs that can carry content whatever the distance. Share of the pairs "
      "slower than the analysed length, per layer: " +
      slow + ".");
}

void head_entropy(Page& p, const std::vector<Run>& runs) {
  p.section("heads", "Last-layer head entropy (paper Fig. 4, column 4)");
  p.html += "<div class=\"row\">\n";
  svg::BarChart c{
      "fig-head-entropy", "Entropy of each head of the last layer", "head", "entropy (nats)", {}, {}};
  size_t heads = 0;
  for (const Run& r : runs) {
    heads = std::max(heads, r.b.last_layer_head_entropy.size());
    c.series.push_back({r.identical ? r.label : r.label + " B", r.color, r.b.last_layer_head_entropy});
    if (!r.identical) c.series.push_back({r.label + " A", lighter(r.color), r.a.last_layer_head_entropy});
  }
  for (size_t h = 0; h < heads; ++h) c.categories.push_back(fmt::format("{}", h));
  c.width = std::max<int>(420, static_cast<int>(80 + heads * c.series.size() * 22));
  p.add(c.id, svg::bar_chart(c));
  p.html += "</div>\n";
  p.caption("Dark bars: B (refined); light bars of the same hue: A (softmax)." + identical_note(runs));
}

void trends(Page& p, const std::vector<Run>& runs) {
  p.section("trends", "Per-layer eval GTD and entropy over training");
  size_t layers = 0;
  for (const Run& r : runs)
    layers = std::max({layers, r.metrics.eval_gtd.size(), r.metrics.eval_entropy.size()});
  bool any = false;
  for (const Run& r : runs) any = any || !r.metrics.eval_step.empty();
  if (!any) {
    p.caption("No evaluation lines in metrics.jsonl (train.eval_every = 0): no trends to draw.");
    return;
  }
  struct Metric {
    const char* key;
    const char* name;
    LayerSeries Metrics::*b;
    LayerSeries Metrics::*a;
  };
  const Metric metrics[] = {{"gtd", "GTD", &Metrics::eval_gtd, &Metrics::eval_gtd_softmax},
                            {"entropy", "entropy", &Metrics::eval_entropy, &Metrics::eval_entropy_softmax}};
  for (const Metric& m : metrics) {
    p.html += "<div class=\"row\">\n";
    for (size_t l = 0; l < layers; ++l) {
      const std::string id = fmt::format("fig-trend-{}-l{}", m.key, l);
      svg::LineChart c{id, fmt::format("Layer {}: eval {}", l, m.name), "step", m.name, {}};
      c.width = 340;
      c.height = 240;
      for (const Run& r : runs) {
        const LayerSeries& b = r.metrics.*m.b;
        const LayerSeries& a = r.metrics.*m.a;
        if (l < b.size())
          c.series.push_back(
              {r.identical ? r.label : r.label + " B", r.color, r.metrics.eval_step, b[l], false, true});
        if (!r.identical && l < a.size())
          c.series.push_back({r.label + " A", r.color, r.metrics.eval_step, a[l], true, true});
      }
      p.add(id, svg::line_chart(c));
    }
    p.html += "</div>\n";
  }
  p.caption(
      "One chart per layer; solid: B (refined), dashed: A (softmax), measured at every evaluation on a probe "
      "batch of the validation stream." +
      identical_note(runs));
}

namespace {

// (1,NH,T,T) -> head `h` as a (T x T) row-major grid, average-pooled to at most `max_side` per side.
std::vector<double> head_grid(const Tensor& maps, int64_t h, int64_t max_side, int64_t& side, int64_t& pool) {
  const int64_t T = maps.size(-1);
  const std::vector<float> v = maps.to_vector<float>();
  pool = (T + max_side - 1) / max_side;
  side = (T + pool - 1) / pool;
  std::vector<double> g(static_cast<size_t>(side * side), 0.0), n(g.size(), 0.0);
  const size_t base = static_cast<size_t>(h * T * T);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const size_t k = static_cast<size_t>((i / pool) * side + j / pool);
      g[k] += v[base + static_cast<size_t>(i * T + j)];
      n[k] += 1;
    }
  for (size_t k = 0; k < g.size(); ++k) g[k] /= n[k];
  return g;
}

}  // namespace

void heatmaps(Page& p, const std::vector<Run>& runs, const ReportOptions& opt) {
  p.section("heatmaps", "Attention heatmaps (paper Fig. 6)");
  p.caption(
      fmt::format("Validation sample {} of each run, head 0 of every layer: rows are queries, columns keys. "
                  "A (softmax) and B (refined) of a layer share one color scale.",
                  opt.sample_index));
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const Run& r = runs[ri];
    const Inspection& s = r.sample;
    p.html +=
        fmt::format("<h3><span class=\"swatch\" style=\"background:{}\"></span> {} &mdash; {} tokens</h3>\n",
                    r.color, svg::escape(r.label), s.ids.size());
    p.html += "<div class=\"row\">\n";
    for (size_t l = 0; l < s.maps.size(); ++l) {
      const AttentionMaps& m = s.maps[l];
      const int64_t T = m.attn.size(-1);
      int64_t side = 0, pool = 1;
      const std::vector<double> a = head_grid(m.attn, 0, 128, side, pool);
      const std::vector<double> b =
          r.identical ? a : head_grid(m.probs.defined() ? m.probs : m.attn, 0, 128, side, pool);
      double vmax = 0;
      for (double x : a) vmax = std::max(vmax, x);
      for (double x : b) vmax = std::max(vmax, x);
      svg::Heatmap h;
      h.rows = h.cols = side;
      h.vmin = 0;
      h.vmax = vmax > 0 ? vmax : 1;
      h.cell = static_cast<int>(std::clamp<int64_t>(512 / std::max<int64_t>(side, 1), 2, 20));
      if (T <= 64 && pool == 1) h.row_labels = h.col_labels = s.tokens;
      if (pool > 1) h.xlabel = fmt::format("key ({}x{} blocks averaged)", pool, pool);
      h.id = fmt::format("fig-heat-r{}-l{}-a", ri, l);
      h.values = a;
      h.title = r.identical ? fmt::format("Layer {} head 0: A (= B, original)", l)
                            : fmt::format("Layer {} head 0: A (softmax)", l);
      p.add(h.id, svg::heatmap(h));
      if (!r.identical) {
        h.id = fmt::format("fig-heat-r{}-l{}-b", ri, l);
        h.values = b;
        h.title = fmt::format("Layer {} head 0: B (refined)", l);
        p.add(h.id, svg::heatmap(h));
      }
    }
    p.html += "</div>\n";
  }
}

void correlations(Page& p, const std::vector<Correlation>& cs) {
  if (cs.empty()) return;
  p.section("correlations", "Correlations (saobp correlate)");
  for (size_t i = 0; i < cs.size(); ++i) {
    const nlohmann::json& j = cs[i].j;
    svg::Scatter s;
    s.id = fmt::format("correlation-{}", i);
    s.xlabel = j.value("x", "x");
    s.ylabel = j.value("y", "y");
    for (const nlohmann::json& pt : j["points"]) {
      s.x.push_back(number(pt, "x"));  // NaN where a point has no number
      s.y.push_back(number(pt, "y"));
    }
    s.slope = number(j, "slope");
    s.intercept = number(j, "intercept");
    s.title = fmt::format(
        "{} vs {}: r = {} (p = {}), rho = {}", s.ylabel, s.xlabel, fmt_num(number(j, "pearson_r"), "{:.3f}"),
        fmt_num(number(j, "pearson_p"), "{:.3g}"), fmt_num(number(j, "spearman_rho"), "{:.3f}"));
    p.add(s.id, svg::scatter_chart(s));
    // Rows of analyses: the attention graph each was measured on (CC and BC depend on it).
    std::string graph;
    if (const auto g = j.find("graph"); g != j.end() && g->is_object())
      for (const auto& [src, o] : g->items())
        graph +=
            fmt::format(" Attention graph of {}: tau = {}, {} nodes.", src,
                        fmt_num(number(o, "graph_tau"), "{:g}"), fmt_num(number(o, "graph_nodes"), "{:.0f}"));
    p.caption(fmt::format("{} points over {} ({} left out), {}; dashed: the least-squares line.{}",
                          s.x.size(), j.value("over", "?"), j.value("left_out", int64_t{0}), cs[i].path,
                          graph));
  }
}

void cost_tables(Page& p, const std::vector<Correlation>& costs) {
  if (costs.empty()) return;
  p.section("cost", "Cost per attention variant (saobp cost; the paper's Table 9)");
  for (const Correlation& c : costs) {
    const nlohmann::json& t = c.j["cost_table"];
    p.html += fmt::format(
        "<p>{} {}, B = {}, T = {}: {} tokens per training step, {} per inference batch, latency at B = 1 "
        "(<code>{}</code>)</p>\n",
        json_text(t, "family"), json_text(t, "preset"), fmt_num(number(t, "batch_size"), "{:.0f}"),
        fmt_num(number(t, "seq_len"), "{:.0f}"), fmt_num(number(t, "tokens_per_step"), "{:.0f}"),
        fmt_num(number(t, "tokens_per_batch"), "{:.0f}"), svg::escape(c.path));
    p.html +=
        "<table class=\"results\"><tr><th>attention</th><th>train GFLOP/step</th><th>vs original</th>"
        "<th>train ms/step</th><th>train tokens/s</th><th>inference GFLOP/batch</th><th>vs original</th>"
        "<th>inference FLOP/token</th><th>inference ms/batch</th><th>inference tokens/s</th>"
        "<th>latency ms</th></tr>\n";
    for (const nlohmann::json& v : t["variants"]) {
      // Each cell: a number of the variant's row, formatted, or "-" where the file has none.
      auto cell = [&](const char* key, const char* f, double scale) {
        return fmt::format("<td class=\"num\">{}</td>", fmt_num(scale * number(v, key), f));
      };
      p.html += fmt::format(
          "<tr><td>{}</td>{}{}{}{}{}{}{}{}{}{}</tr>\n", json_text(v, "attention"),
          cell("train_flops_per_step", "{:.4g}", 1e-9), cell("extra_train_flops", "{:+.1f}%", 100),
          cell("ms_per_step", "{:.1f}", 1), cell("tokens_per_s", "{:.0f}", 1),
          cell("inference_flops_per_batch", "{:.4g}", 1e-9), cell("extra_inference_flops", "{:+.1f}%", 100),
          cell("inference_flops_per_token", "{:.4g}", 1), cell("inference_ms_per_batch", "{:.2f}", 1),
          cell("inference_tokens_per_s", "{:.0f}", 1), cell("latency_ms", "{:.2f}", 1));
    }
    p.html += "</table>\n";
  }
  p.caption(
      "FLOPs as src/train/flops.h counts them (docs/performance.md); training times from saobp bench --json, "
      "inference times (the evaluation forward pass at B, and at B = 1 for the latency) from saobp bench "
      "--inference --json, where given.");
}

void skip_rates(Page& p, const std::vector<Run>& runs) {
  p.section("skip", "Head-skip rates per layer");
  std::vector<std::string> off;
  svg::LineChart c{"fig-skip", "Fraction of (sample, head) skipped", "step", "skip rate", {}};
  c.width = 560;
  c.ymin = 0;
  c.ymax = 1;
  for (const Run& r : runs) {
    if (r.metrics.skip_rate.empty()) {
      off.push_back(r.name);
      continue;
    }
    for (size_t l = 0; l < r.metrics.skip_rate.size(); ++l) {
      // Layers of one run share its hue, from dark (layer 0) to light (last layer), odd ones dashed.
      const double t = 0.65 * static_cast<double>(l) /
                       static_cast<double>(std::max<size_t>(1, r.metrics.skip_rate.size() - 1));
      const std::string color = tint(r.color, t);
      c.series.push_back({fmt::format("{} layer {}", r.label, l), color, r.metrics.skip_step,
                          r.metrics.skip_rate[l], l % 2 == 1, false});
    }
  }
  if (!c.series.empty()) {
    p.html += "<div class=\"row\">\n";
    p.add(c.id, svg::line_chart(c));
    p.html += "</div>\n";
  }
  if (!off.empty())
    p.caption(fmt::format("{}: head skip off (no skip_rate in metrics.jsonl).", fmt::join(off, ", ")));
}

const char* const kStyle = R"(<style>
body { font-family: sans-serif; margin: 20px 28px; color: #222; }
h1 { margin-bottom: 4px; } h2 { margin-top: 30px; border-bottom: 1px solid #ccc; padding-bottom: 3px; }
h3 { margin: 14px 0 4px; font-size: 15px; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; }
th { background: #f2f2f2; }
.swatch { display: inline-block; width: 14px; height: 14px; border-radius: 2px; vertical-align: middle; }
.row { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
.fig { border: 1px solid #eee; padding: 4px; }
.caption { color: #555; font-size: 13px; max-width: 1100px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
</style>
)";

// Marks the page checked (html[data-report-check="ok"]) when every listed figure is a non-empty,
// laid-out <svg>: what the headless-browser test looks for.
const char* const kCheckScript = R"(<script>
(function () {
  var ids = document.body.getAttribute('data-figures').split(' ').filter(Boolean), bad = [];
  for (var i = 0; i < ids.length; i++) {
    var e = document.getElementById(ids[i]);
    if (!e || e.tagName.toLowerCase() !== 'svg' || e.childElementCount === 0) { bad.push(ids[i]); continue; }
    var b = e.getBBox();
    if (!(b.width > 0 && b.height > 0)) bad.push(ids[i]);
  }
  document.documentElement.setAttribute('data-report-check', bad.length ? 'missing: ' + bad.join(' ') : 'ok');
})();
</script>
)";

}  // namespace saobp::report
