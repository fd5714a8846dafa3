// `saobp report`: the SVG primitives (escaping, ranges with NaN, degenerate series), the page
// end to end on two tiny trained runs, and (when chromium is installed) a headless render.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "core/fs.h"
#include "report/report.h"
#include "report/svg.h"
#include "train/config.h"
#include "train/trainer.h"

using namespace saobp;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("saobp-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The numbers in every attribute of the markup are finite: no "nan" or "inf" leaked into it.
bool all_numbers_finite(const std::string& svg) {
  static const std::regex bad("=\"[^\"]*(nan|inf)[^\"]*\"", std::regex::icase);
  return !std::regex_search(svg, bad);
}

// chromium (or chromium-browser) on PATH, "" when absent.
std::string find_chromium() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    for (const char* name : {"chromium", "chromium-browser"}) {
      const fs::path c = fs::path(p.substr(start, end - start)) / name;
      if (!c.parent_path().empty() && ::access(c.c_str(), X_OK) == 0) return c.string();
    }
    start = end + 1;
  }
  return "";
}

RunConfig tiny_run(const std::string& run_dir, const std::string& attention,
                   std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.preset=custom",    "model.vocab_size=32",
                                "model.hidden=16",        "model.layers=2",
                                "model.heads=2",          "model.intermediate=32",
                                "model.max_positions=16", "model.attention=" + attention,
                                "train.seq_len=12",       "train.batch_size=4",
                                "train.max_steps=6",      "train.warmup_steps=2",
                                "train.lr=3e-3",          "train.eval_every=3",
                                "train.eval_batches=2",   "train.log_every=1",
                                "train.save_every=0",     "train.run_dir=" + run_dir};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o);
}

}  // namespace

TEST_CASE("report svg: escaping of text and attributes", "[report]") {
  CHECK(svg::escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(svg::escape("plain") == "plain");
  CHECK(svg::escape(std::string("x\x01y")) == "x\xEF\xBF\xBDy");
  CHECK(svg::escape("caf\xC3\xA9") == "caf\xC3\xA9");  // UTF-8 passes through
  svg::LineChart c{"id\"x", "<title> & co", "x <", "y >", {}};
  c.series.push_back({"run <'a'>", "#123456", {0, 1}, {1, 2}});
  const std::string s = svg::line_chart(c);
  CHECK(s.find("id=\"id&quot;x\"") != std::string::npos);
  CHECK(s.find("&lt;title&gt; &amp; co") != std::string::npos);
  CHECK(s.find("run &lt;&#39;a&#39;&gt;") != std::string::npos);
  CHECK(s.find("<title>") == std::string::npos);
  CHECK(s.find("run <") == std::string::npos);

  svg::Heatmap h;
  h.id = "hm";
  h.rows = h.cols = 2;
  h.values = {0.5, 0.5, 1, 0};
  h.row_labels = h.col_labels = {"<s>", "a&b"};
  const std::string hm = svg::heatmap(h);
  CHECK(count(hm, "&lt;s&gt;") == 2);
  CHECK(count(hm, "a&amp;b") == 2);
  CHECK(hm.find("<s>") == std::string::npos);
}

TEST_CASE("report svg: axis ranges skip NaN and infinity, ticks cover the data", "[report]") {
  const svg::Range r = svg::finite_range({kNaN, 3, 1, INFINITY, -INFINITY, 2});
  CHECK(r.found);
  CHECK(r.lo == 1);
  CHECK(r.hi == 3);
  CHECK_FALSE(svg::finite_range({kNaN, kNaN}).found);
  CHECK_FALSE(svg::finite_range({}).found);

  for (auto [lo, hi] :
       {std::pair{0.13, 0.87}, {-3.0, 250.0}, {1e-4, 9e-4}, {2.0, 2.0}, {0.0, 0.0}, {-5.0, -5.0}}) {
    const std::vector<double> t = svg::nice_ticks(lo, hi, 5);
    INFO(lo << " .. " << hi);
    REQUIRE(t.size() >= 2);
    CHECK(t.front() <= lo);
    CHECK(t.back() >= hi);
    CHECK(t.back() > t.front());
    CHECK(t.size() <= 12);
    for (size_t i = 2; i < t.size(); ++i)
      CHECK(std::abs((t[i] - t[i - 1]) - (t[1] - t[0])) < 1e-9 * (t[1] - t[0]));
  }
  CHECK(svg::tick_label(0.4, 0.2) == "0.4");
  CHECK(svg::tick_label(200, 100) == "200");
  CHECK(svg::tick_label(0, 0.5) == "0");
  CHECK(svg::tick_label(0.0004, 0.0002) == "0.0004");

  // A NaN in the middle of a series breaks the line in two; it never reaches the markup.
  svg::LineChart c{"c", "t", "x", "y", {}};
  c.series.push_back({"s", "#000000", {0, 1, 2, 3, 4}, {1, 2, kNaN, 4, 5}});
  const std::string s = svg::line_chart(c);
  CHECK(count(s, "<polyline") == 2);
  CHECK(all_numbers_finite(s));
  CHECK(s.find("no data") == std::string::npos);
}

TEST_CASE("report svg: a constant series, a single point, no data", "[report]") {
  svg::LineChart c{"c", "constant", "step", "loss", {}};
  c.series.push_back({"flat", "#000000", {0, 10, 20}, {2.5, 2.5, 2.5}});
  std::string s = svg::line_chart(c);
  CHECK(count(s, "<polyline") == 1);
  CHECK(all_numbers_finite(s));

  // A fixed y range (rates): a constant 0 sits on the bottom of [0, 1], no negative tick.
  c.series = {{"rate", "#000000", {0, 10, 20}, {0, 0, 0}}};
  c.ymin = 0;
  c.ymax = 1;
  s = svg::line_chart(c);
  CHECK(s.find(">-") == std::string::npos);
  CHECK(s.find(">1.0</text>") != std::string::npos);
  c.ymin = c.ymax = kNaN;

  c.series = {{"one", "#000000", {7}, {0.3}}};
  s = svg::line_chart(c);
  CHECK(count(s, "<polyline") == 0);
  CHECK(count(s, "<circle") == 1);
  CHECK(all_numbers_finite(s));

  c.series = {{"nothing", "#000000", {0, 1}, {kNaN, kNaN}}};
  s = svg::line_chart(c);
  CHECK(s.find("no data") != std::string::npos);
  CHECK(all_numbers_finite(s));

  svg::BarChart b{"b", "bars", "head", "entropy", {"0", "1", "2"}, {}};
  b.series.push_back({"r", "#111111", {1.0, kNaN, 2.0}});
  s = svg::bar_chart(b);
  CHECK(count(s, "<rect") == 1 + 2 + 1);  // frame, two bars, legend swatch
  CHECK(all_numbers_finite(s));

  CHECK(svg::color_map(0) == "#440154");
  CHECK(svg::color_map(1) == "#fde725");
  CHECK(svg::color_map(2) == "#fde725");
  CHECK(svg::color_map(kNaN) == "#dddddd");
}

TEST_CASE("report: layer metrics are read from DiagnosticsReport JSON, bad input names the file",
          "[report]") {
  const nlohmann::json j = {
      {"attn",
       {{"layers",
         {{{"gtd", 0.1}, {"indirect_entropy", 1.0}, {"entropy", 2.0}},
          {{"gtd", nullptr}, {"indirect_entropy", 1.5}, {"entropy", 2.5}}}},
        {"last_layer_head_entropy", {2.4, 2.6}}}},
      {"probs", {{"layers", nlohmann::json::array()}, {"last_layer_head_entropy", nlohmann::json::array()}}}};
  const LayerMetrics a = layer_metrics_from_json(j, "attn", "x.json");
  REQUIRE(a.gtd.size() == 2);
  CHECK(a.gtd[0] == 0.1);
  CHECK(std::isnan(a.gtd[1]));
  CHECK(a.entropy[1] == 2.5);
  CHECK(a.last_layer_head_entropy == std::vector<double>{2.4, 2.6});
  const LayerMetrics wrapped = layer_metrics_from_json({{"report", j}}, "attn", "x.json");
  CHECK(wrapped.indirect_entropy == a.indirect_entropy);
  CHECK_THROWS_WITH(layer_metrics_from_json({{"foo", 1}}, "attn", "x.json"), Catch::Contains("x.json"));

  const std::string dir = temp_dir("report-missing");
  fs::create_directories(dir);
  ReportOptions o;
  o.runs = {dir};
  CHECK_THROWS_WITH(build_report(o),
                    Catch::Contains("[report]") && Catch::Contains(dir) && Catch::Contains("metrics.jsonl"));
  write_file_atomic((fs::path(dir) / "metrics.jsonl").string(), "{\"step\": 1, \"loss\": 2}\n");
  CHECK_THROWS_WITH(build_report(o), Catch::Contains(dir) && Catch::Contains("final"));
  o.runs = {dir + "/nope"};
  CHECK_THROWS_WITH(build_report(o), Catch::Contains("nope"));
  fs::remove_all(dir);
}

TEST_CASE("report: a page comparing an original and a bp_high run has every figure", "[report]") {
  const std::string root = temp_dir("report-e2e");
  const std::string orig = (fs::path(root) / "orig").string(), bp = (fs::path(root) / "bp").string();
  TrainOptions quiet;
  quiet.quiet = true;
  train(tiny_run(orig, "original"), quiet);
  train(tiny_run(bp, "bp_high", {"model.skip_sinky_heads=true"}), quiet);

  ReportOptions o;
  o.runs = {orig, bp + "/"};
  o.out = (fs::path(root) / "report.html").string();
  o.samples = 8;
  write_report(o);
  const std::string html = read_file(o.out);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("orig (original)") != std::string::npos);
  CHECK(html.find("bp (bp_high)") != std::string::npos);
  for (const char* id :
       {"fig-train-loss", "fig-eval-loss", "fig-lr", "fig-layer-gtd", "fig-layer-indirect-entropy",
        "fig-layer-entropy", "fig-head-entropy", "fig-trend-gtd-l0", "fig-trend-gtd-l1",
        "fig-trend-entropy-l0", "fig-trend-entropy-l1", "fig-heat-r0-l0-a", "fig-heat-r0-l1-a",
        "fig-heat-r1-l0-a", "fig-heat-r1-l0-b", "fig-heat-r1-l1-a", "fig-heat-r1-l1-b", "fig-skip"}) {
    INFO(id);
    CHECK(html.find(std::string("id=\"") + id + "\"") != std::string::npos);
  }
  // The original run's A and B are the same map: drawn once, and the page says so.
  CHECK(html.find("id=\"fig-heat-r0-l0-b\"") == std::string::npos);
  CHECK(html.find("A and B are identical") != std::string::npos);
  CHECK(html.find("orig: head skip off") != std::string::npos);
  // Self-contained: no external resource, no script but the inline check.
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));
  CHECK(html.find("https://") == std::string::npos);
  CHECK(count(html, "<script") == 1);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(all_numbers_finite(html));

  // An analysis.json next to the checkpoint is read instead of recomputing.
  const nlohmann::json fake = {
      {"attn",
       {{"layers", {{{"gtd", 0.123456}, {"indirect_entropy", 1.0}, {"entropy", 2.0}}}},
        {"last_layer_head_entropy", {1.0, 1.0}}}},
      {"probs",
       {{"layers", {{{"gtd", 0.25}, {"indirect_entropy", 1.0}, {"entropy", 2.0}}}},
        {"last_layer_head_entropy", {1.0, 1.0}}}}};
  write_file_atomic((fs::path(orig) / "final" / "analysis.json").string(), fake.dump());
  const std::string again = build_report(o);
  CHECK(again.find((fs::path(orig) / "final" / "analysis.json").string()) != std::string::npos);

  // Rendered by a headless browser: the inline check finds every figure laid out, no JS error.
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    WARN("chromium is not installed: the headless-browser check of the report is skipped");
  } else {
    const std::string dom = (fs::path(root) / "dom.html").string(),
                      err = (fs::path(root) / "chromium.log").string();
    const std::string cmd = "'" + chromium + "' --headless --disable-gpu --no-sandbox --user-data-dir='" +
                            root + "/chromium-profile' --enable-logging=stderr --v=0 --dump-dom 'file://" +
                            o.out + "' > '" + dom + "' 2> '" + err + "'";
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string out = read_file(dom), log = read_file(err);
    INFO(log);
    CHECK(out.find("data-report-check=\"ok\"") != std::string::npos);
    CHECK(log.find("Uncaught") == std::string::npos);

    // The check is not vacuous: a page with a figure missing is flagged, naming it.
    std::string broken = html;
    broken.replace(broken.find("id=\"fig-lr\""), 11, "id=\"fig-xx\"");
    write_file_atomic(o.out, broken);
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(read_file(dom).find("data-report-check=\"missing: fig-lr\"") != std::string::npos);
  }
  fs::remove_all(root);
}

namespace {

// The markup of the element that starts at `start` (an "<svg" or "<table") up to its end tag.
std::string element_at(const std::string& html, const std::string& start, const std::string& end) {
  const size_t a = html.find(start);
  if (a == std::string::npos) return "";
  const size_t b = html.find(end, a);
  return html.substr(a, b == std::string::npos ? std::string::npos : b + end.size() - a);
}
std::string svg_of(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t a = html.rfind("<svg", at);
  return element_at(html.substr(a), "<svg", "</svg>");
}

}  // namespace

TEST_CASE("report: fine-tuning curves and a results table when the runs have them, not otherwise",
          "[report]") {
  const std::string root = temp_dir("report-finetune");
  const fs::path pre = fs::path(root) / "pre", ft = fs::path(root) / "ft";
  TrainOptions quiet;
  quiet.quiet = true;
  train(tiny_run(pre.string(), "original"), quiet);

  // A pretraining run alone: no fine-tuning curves, no results table, sections numbered as before.
  ReportOptions o;
  o.runs = {pre.string()};
  o.samples = 4;
  std::string html = build_report(o);
  CHECK(html.find("<h2 id=\"training\">1. Training curves</h2>") != std::string::npos);
  CHECK(html.find("id=\"finetune\"") == std::string::npos);
  CHECK(html.find("id=\"results\"") == std::string::npos);
  CHECK(html.find("fig-ft-") == std::string::npos);
  CHECK(html.find("<table class=\"results\"") == std::string::npos);

  // A fine-tuning run (MNLI-like): its checkpoint, with metrics.jsonl and results.json by hand.
  fs::copy(pre, ft, fs::copy_options::recursive);
  std::string lines;
  for (int s = 1; s <= 6; ++s)
    lines += fmt::format("{{\"step\": {}, \"loss\": {}, \"lr\": 0.001}}\n", s, 3 - 0.1 * s);
  lines +=
      "{\"step\": 2, \"eval_loss\": 2.0, \"eval_accuracy\": 0.3, \"eval_metrics\": {\"dev_matched\": "
      "{\"accuracy\": 0.5}, \"dev_mismatched\": {\"accuracy\": 0.52}, \"test_matched\": {\"unlabeled\": "
      "true, "
      "\"examples\": 9796}}}\n"
      "{\"step\": 3, \"epoch\": 1, \"eval_loss\": 1.9, \"eval_accuracy\": 0.3, \"eval_metrics\": "
      "{\"dev_matched\": "
      "{\"accuracy\": 0.61}, \"dev_mismatched\": {\"accuracy\": 0.6}}}\n"
      "{\"step\": 5, \"eval_loss\": 1.8, \"eval_accuracy\": 0.3, \"eval_metrics\": {\"dev_matched\": "
      "{\"accuracy\": 0.7}}}\n"
      "{\"step\": 6, \"epoch\": 2, \"eval_loss\": 1.7, \"eval_accuracy\": 0.3, \"eval_metrics\": "
      "{\"dev_matched\": "
      "{\"accuracy\": 0.8123}, \"dev_mismatched\": {\"accuracy\": 0.8045, \"examples\": 9832}}}\n";
  write_file_atomic((ft / "metrics.jsonl").string(), lines);
  const nlohmann::json mnli = {
      {"task", "glue/mnli"},
      {"attention", "bp_high"},
      {"family", "bert"},
      {"steps", 6},
      {"metrics",
       {{"dev_matched", {{"accuracy", 0.8123}}},
        {"dev_mismatched", {{"accuracy", 0.8045}}},
        {"test_matched", {{"unlabeled", true}, {"examples", 9796}}}}},
      {"examples", {{"train", 392702}, {"dev_matched", 9815}, {"dev_mismatched", 9832}}},
      {"truncated", {{"train", 12}, {"dev_matched", 0}, {"dev_mismatched", 1}}},
      {"skipped_rows",
       {{"train", {{"rows", 2}, {"first", {"train.tsv:17: 3 fields"}}}},
        {"dev_matched", {{"rows", 0}, {"first", nlohmann::json::array()}}}}},
      {"evaluations", nlohmann::json::array()}};
  write_file_atomic((ft / "results.json").string(), mnli.dump(2));
  // `saobp eval --task` outputs: a folder holding only results.json, and a results.json path.
  const fs::path sst2 = fs::path(root) / "eval" / "glue-sst2", squad = fs::path(root) / "eval" / "squad";
  fs::create_directories(sst2);
  fs::create_directories(squad);
  write_file_atomic((sst2 / "results.json").string(),
                    nlohmann::json({{"task", "glue/sst2"},
                                    {"attention", "original"},
                                    {"family", "bert"},
                                    {"checkpoint", "runs/finetune/glue-sst2/final"},
                                    {"metrics", {{"dev", {{"accuracy", 0.9106}}}}},
                                    {"examples", {{"dev", 872}}},
                                    {"truncated", {{"dev", 0}}}})
                        .dump());
  write_file_atomic((squad / "results.json").string(),
                    nlohmann::json({{"task", "squad/v1.1"},
                                    {"attention", "bp_high"},
                                    {"family", "bert"},
                                    {"steps", 1000},
                                    {"metrics", {{"dev", {{"exact_match", 81.2}, {"f1", 88.5}}}}},
                                    {"examples", {{"dev", 10570}}},
                                    {"truncated", {{"dev", 123}}}})
                        .dump());

  o.runs = {pre.string(), ft.string(), sst2.string(), (squad / "results.json").string()};
  html = build_report(o);
  CHECK(html.find("2 run(s) &middot; 2 evaluation result(s) without a run") != std::string::npos);
  CHECK(html.find("<h2 id=\"results\">1. Fine-tuning and evaluation results</h2>") != std::string::npos);
  CHECK(html.find("<h2 id=\"training\">2. Training curves</h2>") != std::string::npos);
  CHECK(html.find("<h2 id=\"finetune\">3. Fine-tuning curves</h2>") != std::string::npos);
  CHECK(all_numbers_finite(html));

  // One chart per (split, metric) with numbers: no bookkeeping ("examples"), no unlabeled split.
  CHECK(html.find("fig-ft-dev_mismatched-examples") == std::string::npos);
  CHECK(html.find("fig-ft-test_matched") == std::string::npos);
  const std::string matched = svg_of(html, "fig-ft-dev_matched-accuracy");
  REQUIRE(!matched.empty());
  CHECK(matched.find(">dev_matched: accuracy<") != std::string::npos);
  CHECK(count(matched, "<circle") == 4);
  for (const char* point : {"ft (original): step 2, 0.5<", "ft (original): step 3, 0.61<",
                            "ft (original): step 5, 0.7<", "ft (original): step 6, 0.8123<"}) {
    INFO(point);
    CHECK(matched.find(point) != std::string::npos);
  }
  CHECK(matched.find("pre (original)") == std::string::npos);  // the pretraining run has no line here
  CHECK(count(matched, ">e1</text>") == 1);                    // epoch ends: steps 3 and 6
  CHECK(count(matched, ">e2</text>") == 1);
  const std::string mismatched = svg_of(html, "fig-ft-dev_mismatched-accuracy");
  REQUIRE(!mismatched.empty());
  CHECK(count(mismatched, "<circle") == 3);  // step 5 has no dev_mismatched: a gap
  CHECK(count(mismatched, "<polyline") == 1);
  CHECK(mismatched.find("ft (original): step 6, 0.8045<") != std::string::npos);

  // The table: one row per results.json, one column per (split, metric), the counts.
  const std::string table = element_at(html, "<table class=\"results\"", "</table>");
  REQUIRE(!table.empty());
  CHECK(count(table, "<tr>") == 2 + 3);
  CHECK(table.find("<b>pre</b>") == std::string::npos);
  CHECK(table.find("<th colspan=\"3\">dev</th><th colspan=\"1\">dev_matched</th><th colspan=\"1\">"
                   "dev_mismatched</th>") != std::string::npos);
  CHECK(table.find(
            "<tr><th>accuracy</th><th>exact_match</th><th>f1</th><th>accuracy</th><th>accuracy</th></tr>") !=
        std::string::npos);
  CHECK(table.find("test_matched") == std::string::npos);
  const std::string dash = "<td class=\"num\">–</td>";
  CHECK(table.find(
            "<b>ft</b></td><td>glue/mnli</td><td>bp_high</td><td>bert</td><td>6</td>" + dash + dash + dash +
            "<td class=\"num\">0.8123</td><td class=\"num\">0.8045</td><td>dev_matched 9815, dev_mismatched "
            "9832, train 392702</td><td>dev_matched 0, dev_mismatched 1, train 12</td>") !=
        std::string::npos);
  CHECK(table.find("<b>glue-sst2</b></td><td>glue/sst2</td><td>original</td><td>bert</td><td>–</td><td "
                   "class=\"num\">0.9106</td>" +
                   dash + dash + dash + dash + "<td>dev 872</td><td>dev 0</td>") != std::string::npos);
  CHECK(table.find("<b>squad</b></td><td>glue/sst2") == std::string::npos);
  CHECK(table.find("<b>squad</b></td><td>squad/v1.1</td><td>bp_high</td><td>bert</td><td>1000</td>" + dash +
                   "<td class=\"num\">81.20</td><td class=\"num\">88.50</td>" + dash + dash +
                   "<td>dev 10570</td><td>dev 123</td>") != std::string::npos);
  CHECK(html.find("Malformed rows skipped: ft train 2 (first: train.tsv:17: 3 fields).") !=
        std::string::npos);

  // Evaluation results alone: the table and nothing else.
  o.runs = {sst2.string()};
  html = build_report(o);
  CHECK(html.find("<h2 id=\"results\">1. Fine-tuning and evaluation results</h2>") != std::string::npos);
  CHECK(html.find("id=\"training\"") == std::string::npos);
  CHECK(html.find("<svg") == std::string::npos);
  CHECK(html.find("data-figures=\"\"") != std::string::npos);

  // A results.json without metrics is named.
  const fs::path bad = fs::path(root) / "bad";
  fs::create_directories(bad);
  write_file_atomic((bad / "results.json").string(), "{\"task\": \"glue/sst2\"}");
  o.runs = {bad.string()};
  CHECK_THROWS_WITH(build_report(o), Catch::Contains("[report]") &&
                                         Catch::Contains((bad / "results.json").string()) &&
                                         Catch::Contains("metrics"));
  fs::remove_all(root);
}

TEST_CASE("report: a correlation file draws a scatter with its line and r, a cost file its table",
          "[report]") {
  const std::string root = temp_dir("report-corr");
  fs::create_directories(root);
  const std::string corr = root + "/corr.json", cost = root + "/cost.json";
  // Points (1,1) (2,3) (3,2) (4,4): r = 0.8, the line y = 0.8 x + 0.5 (tests/core/test_stats.cpp).
  write_file_atomic(corr, R"({"x": "entropy_L1", "y": "accuracy", "over": "checkpoints", "left_out": 1,
    "points": [{"x": 1, "y": 1}, {"x": 2, "y": 3}, {"x": 3, "y": 2}, {"x": 4, "y": 4}],
    "n": 4, "pearson_r": 0.8, "pearson_p": 0.2, "spearman_rho": 0.8, "slope": 0.8, "intercept": 0.5})");
  write_file_atomic(cost,
                    R"({"cost_table": {"family": "bert", "preset": "custom", "batch_size": 4, "seq_len": 8,
    "tokens_per_step": 32, "head_rows": 8, "tokens_per_batch": 32, "batch_head_rows": 8, "variants": [
      {"attention": "original", "train_flops_per_step": 946176, "inference_flops_per_batch": 315392,
       "inference_flops_per_token": 9856, "extra_train_flops": 0, "ms_per_step": null, "tokens_per_s": null},
      {"attention": "bp_high", "train_flops_per_step": 970752, "inference_flops_per_batch": 326656,
       "inference_flops_per_token": 10208, "extra_train_flops": 0.025974, "extra_inference_flops": 0.035714,
       "ms_per_step": 12.5, "tokens_per_s": 2560, "inference_ms_per_batch": 2.5,
       "inference_tokens_per_s": 12800, "latency_ms": 0.8}]}})");
  ReportOptions o;
  o.runs = {corr, cost};
  o.out = root + "/r.html";
  const std::string html = build_report(o);
  CHECK(html.find("<h2 id=\"correlations\">1. Correlations") != std::string::npos);
  CHECK(html.find("accuracy vs entropy_L1: r = 0.800 (p = 0.2), rho = 0.800") != std::string::npos);
  const size_t at = html.find("id=\"correlation-0\" class=\"chart\"");
  REQUIRE(at != std::string::npos);
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  CHECK(count(svg, "<circle") == 4);                   // the points, no polyline through them
  CHECK(count(svg, "<polyline") == 1);                 // the fitted line only
  CHECK(count(svg, "stroke-dasharray=\"6 4\"") >= 1);  // dashed
  CHECK(all_numbers_finite(svg));
  CHECK(html.find("4 points over checkpoints (1 left out)") != std::string::npos);
  CHECK(html.find("<h2 id=\"cost\">2. Cost per attention variant") != std::string::npos);
  CHECK(html.find("32 tokens per training step, 32 per inference batch, latency at B = 1") !=
        std::string::npos);
  CHECK(html.find("<th>inference ms/batch</th><th>inference tokens/s</th><th>latency ms</th>") !=
        std::string::npos);
  // bp_high's row: 970752 FLOPs = 0.0009708 GFLOP (+2.6%), 12.5 ms, 2560 tokens/s; inference
  // 326656 = 0.0003267 GFLOP (+1/28 = +3.6%), 10208 = 1.021e+04 per token, 2.5 ms, 12800 tokens/s,
  // 0.8 ms at B = 1.
  CHECK(html.find("<tr><td>bp_high</td><td class=\"num\">0.0009708</td><td class=\"num\">+2.6%</td>"
                  "<td class=\"num\">12.5</td><td class=\"num\">2560</td><td class=\"num\">0.0003267</td>"
                  "<td class=\"num\">+3.6%</td><td class=\"num\">1.021e+04</td><td class=\"num\">2.50</td>"
                  "<td class=\"num\">12800</td><td class=\"num\">0.80</td></tr>") != std::string::npos);
  // original measured nothing: its time cells are dashes.
  CHECK(html.find("<tr><td>original</td><td class=\"num\">0.0009462</td><td class=\"num\">+0.0%</td>"
                  "<td class=\"num\">–</td><td class=\"num\">–</td>") != std::string::npos);
  CHECK(html.find("data-figures=\"correlation-0\"") != std::string::npos);
  fs::remove_all(root);
}

TEST_CASE("report: positional scores and the RoPE section are read from DiagnosticsReport JSON", "[report]") {
  const nlohmann::json heads = {
      {{{"diagonal", 0.2}, {"previous", 0.7}}, {{"diagonal", 0.9}, {"previous", nullptr}}}};
  const nlohmann::json j = {{"probs", {{"layers", {{{"gtd", 0.1}}}}, {"heads", heads}}}};
  const LayerMetrics b = layer_metrics_from_json(j, "probs", "x.json");
  CHECK(b.max_diagonal == std::vector<double>{0.9});
  CHECK(b.max_previous == std::vector<double>{0.7});
  CHECK_FALSE(rope_metrics_from_json(j, "x.json"));
  // One layer, two heads, two pairs: Σ_h q k per pair = (1·2 + 1·1, 3·1 + 0·5) = (3, 3).
  nlohmann::json rope = {{"base", 100},
                         {"seq_len", 8},
                         {"wavelength", {6.28, 62.8}},
                         {"slow_share", {0.5}},
                         {"q_norm", {{{1, 3}, {1, 0}}}},
                         {"k_norm", {{{2, 1}, {1, 5}}}},
                         {"decay", {{"distance", {0, 1}}, {"bound", {2.0, 1.5}}}}};
  const auto m = rope_metrics_from_json({{"report", {{"rope", rope}}}}, "x.json");
  REQUIRE(m);
  CHECK(m->energy == std::vector<std::vector<double>>{{0.5, 0.5}});
  CHECK(m->bound == std::vector<double>{1.0, 0.75});
  CHECK(m->base == 100);
  rope["q_norm"] = {{{1, 3}}};  // one head of q, two of k
  CHECK_THROWS_WITH(rope_metrics_from_json({{"rope", rope}}, "x.json"),
                    Catch::Contains("x.json: rope.q_norm"));
  rope["q_norm"] = {{{1, 3}, {1, "a"}}};
  CHECK_THROWS_WITH(rope_metrics_from_json({{"rope", rope}}, "x.json"), Catch::Contains("rope.q_norm"));
  rope["q_norm"] = {{{1, 3}, {1, 0}}};
  rope["decay"] = {{"distance", {0}}, {"bound", {0.0}}};
  CHECK_THROWS_WITH(rope_metrics_from_json({{"rope", rope}}, "x.json"), Catch::Contains("rope.decay"));
}
