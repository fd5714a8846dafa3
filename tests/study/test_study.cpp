// src/study/: the study file, the plan, the table's statistics against hand-computed values, and
// correlations over a run's checkpoints. (tools/check_study.sh runs a whole study, kills it
// midway and resumes it.)
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "study/correlate.h"
#include "study/study.h"

using namespace saobp;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the test run's temporary directory (removed with it: tests/main.cpp).
std::string temp_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("saobp-test-study-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = (fs::path(dir) / name).string();
  write_file_atomic(path, text);
  return path;
}

Approx near(double v) { return Approx(v).epsilon(1e-12).margin(1e-14); }

study::RunRecord record(const std::string& variant, int64_t seed,
                        std::vector<std::pair<std::string, double>> m) {
  study::RunRecord r;
  r.cell = "model.attention=" + variant;
  r.id = r.cell + "/seed-" + std::to_string(seed);
  r.task = "pretrain";
  r.seed = seed;
  r.axes = {{"model.attention", variant}};
  r.metrics = std::move(m);
  return r;
}

const nlohmann::json& find(const nlohmann::json& list, const std::string& metric) {
  for (const nlohmann::json& m : list)
    if (m["metric"] == metric) return m;
  FAIL("no metric " << metric);
  return list;
}

}  // namespace

TEST_CASE("study: the table's means, deviations and paired differences, by hand", "[study]") {
  study::StudySpec spec;
  spec.name = "t";
  spec.seeds = {1, 2};
  spec.axes = {{"model.attention", {"original", "bp_high"}}};
  // loss: original {3.0, 2.0}, bp_high {2.5, 1.0} (seeds 1, 2); "extra" only in one bp_high run.
  const std::vector<study::RunRecord> runs = {
      record("original", 1, {{"loss", 3.0}}), record("original", 2, {{"loss", 2.0}}),
      record("bp_high", 1, {{"loss", 2.5}, {"extra", 7.0}}), record("bp_high", 2, {{"loss", 1.0}})};
  const nlohmann::json t = study::aggregate(spec, runs);
  REQUIRE(t["cells"].size() == 2);
  const nlohmann::json& orig = t["cells"][0];
  const nlohmann::json& bp = t["cells"][1];
  CHECK(orig["cell"] == "model.attention=original");
  CHECK_FALSE(orig.contains("paired"));  // the baseline is not compared with itself
  // original: mean (3 + 2)/2 = 2.5, sd sqrt((0.25 + 0.25)/1) = sqrt(0.5).
  CHECK(find(orig["metrics"], "loss")["mean"].get<double>() == near(2.5));
  CHECK(find(orig["metrics"], "loss")["sd"].get<double>() == near(std::sqrt(0.5)));
  CHECK(find(orig["metrics"], "loss")["n"] == 2);
  // bp_high: mean 1.75, deviations 0.75 and -0.75: sd sqrt(1.125).
  CHECK(find(bp["metrics"], "loss")["mean"].get<double>() == near(1.75));
  CHECK(find(bp["metrics"], "loss")["sd"].get<double>() == near(std::sqrt(1.125)));
  // One value: n 1, no sd, no paired test.
  CHECK(find(bp["metrics"], "extra")["n"] == 1);
  CHECK(find(bp["metrics"], "extra")["sd"].is_null());
  CHECK(bp["baseline_cell"] == "model.attention=original");
  REQUIRE(bp["paired"].size() == 1);
  // Paired by seed: d = {2.5 - 3.0, 1.0 - 2.0} = {-0.5, -1.0}: mean -0.75, sd sqrt(2 (0.25)^2 / 1) =
  // sqrt(0.125), se = sqrt(0.125)/sqrt(2) = 0.25, q = t(0.975, 1) = tan(0.475 pi) =
  // 12.706204736174696: interval -0.75 -+ 3.176551184043674 = [-3.926551184043674,
  // 2.426551184043674]; t = -0.75/0.25 = -3, p = 1 - 2 atan(3)/pi = 0.20483276469913347.
  const nlohmann::json& p = find(bp["paired"], "loss");
  CHECK(p["n"] == 2);
  CHECK(p["mean"].get<double>() == near(-0.75));
  CHECK(p["sd"].get<double>() == near(std::sqrt(0.125)));
  CHECK(p["lo"].get<double>() == near(-3.926551184043674));
  CHECK(p["hi"].get<double>() == near(2.426551184043674));
  CHECK(p["t"].get<double>() == near(-3));
  CHECK(p["p"].get<double>() == near(0.20483276469913347));
  // The markdown and CSV carry the same numbers.
  CHECK_THAT(study::table_markdown(t),
             Contains("| loss | 2 | 1.75 | 1.06066 | -0.75 | [-3.92655, 2.42655] | 0.204833 |"));
  CHECK_THAT(study::table_csv(t),
             Contains("model.attention=bp_high,bp_high,pretrain,loss,2,1.75,1.06066,-0.75,"
                      "-3.92655,2.42655,0.204833\n"));
}

// A one-layer BERT of hidden size 16 trained 4 steps, evaluated at steps 2 and 4: the
// [study] overrides of the study files written below.
const std::string kTinyOverrides = R"(overrides = ["model.preset=custom", "model.hidden=16", "model.heads=2",
  "model.layers=1", "model.intermediate=32", "model.vocab_size=64", "model.max_positions=16",
  "train.seq_len=12", "train.max_steps=4", "train.warmup_steps=1", "train.eval_every=2"]
)";

TEST_CASE("study: the study file, its errors and the plan", "[study]") {
  const std::string dir = temp_dir("file");
  const std::string good = write(dir, "s.toml", "[study]\nseeds = [3, 4]\n" + kTinyOverrides + R"(
[axes]
"model.lambda" = [0.1, 0.2]
"model.attention" = ["original", "bp_high"]
)");
  const study::StudySpec s = study::load_study(good);
  CHECK(s.name == "s");
  CHECK(s.seeds == std::vector<int64_t>{3, 4});
  REQUIRE(s.axes.size() == 2);
  CHECK(s.axes[0].first == "model.lambda");  // the file's order, not toml++'s sorted order
  CHECK(s.axes[0].second == std::vector<std::string>{"0.1", "0.2"});
  const std::vector<study::PlannedRun> plan = study::plan_study(s, dir + "/out");
  REQUIRE(plan.size() == 8);
  CHECK(plan[0].id == "model.lambda=0.1,model.attention=original/seed-3");
  CHECK(plan[1].id == "model.lambda=0.1,model.attention=original/seed-4");
  CHECK(plan[2].cell == "model.lambda=0.1,model.attention=bp_high");
  CHECK(study::child_args(s, plan, 0, "")[0] == "train");
  CHECK(study::child_args(s, plan, 0, "/x/checkpoint-2").back() == "/x/checkpoint-2");

  auto error_of = [&](const std::string& text) {
    const std::string f = write(dir, "bad.toml", text);
    try {
      study::plan_study(study::load_study(f), dir + "/out");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("[study]\nseedz = [1]\n"), Contains("bad.toml") && Contains("unknown key study.seedz"));
  CHECK_THAT(error_of("[study]\nseeds = [1, 1]\n"), Contains("repeats 1"));
  CHECK_THAT(error_of("[axes]\nattention = [\"original\"]\n"), Contains("\"section.key\""));
  CHECK_THAT(error_of("[axes]\n\"model.attention\" = []\n"), Contains("non-empty array"));
  CHECK_THAT(error_of("[axes]\n\"model.attentoin\" = [\"x\"]\n"),
             Contains("bad.toml") && Contains("attentoin"));
  CHECK_THAT(
      error_of(
          "[study]\noverrides = [\"train.max_steps=5\", \"train.warmup_steps=1\", \"train.eval_every=2\"]\n"),
      Contains("must divide"));
  CHECK_THAT(error_of("[study\n"), Contains("bad.toml:1"));
  // Keys the study sets itself, and a compare or baseline that no cell has.
  CHECK_THAT(error_of("[axes]\n\"train.seed\" = [5, 6]\n"),
             Contains("bad.toml") && Contains("the axis \"train.seed\"") && Contains("study.seeds"));
  CHECK_THAT(error_of("[study]\noverrides = [\"train.run_dir=/tmp/x\"]\n"),
             Contains("bad.toml") && Contains("study.overrides") && Contains("sets train.run_dir"));
  CHECK_THAT(error_of("[variants]\noriginal = [\"train.seed = 3\"]\n"),
             Contains("variants.original") && Contains("sets train.seed"));
  CHECK_THAT(error_of("[study]\ncompare = \"model.lambda\"\n[axes]\n\"model.attention\" = [\"original\"]\n"),
             Contains("bad.toml") && Contains("study.compare 'model.lambda' is not an axis"));
  CHECK_THAT(error_of("[study]\nbaseline = \"bp_low\"\n[axes]\n\"model.attention\" = [\"original\"]\n"),
             Contains("study.baseline 'bp_low' is not a value of the axis \"model.attention\""));
  // The name is one folder under studies/; the grid is counted before it is planned.
  for (const char* name : {"../../x", "a/b", "..", ".", ""})
    CHECK_THAT(error_of(fmt::format("[study]\nname = \"{}\"\n", name)),
               Contains(fmt::format("study.name '{}' is not a folder name", name)));
  std::string big = "[axes]\n";
  for (const char* key : {"model.lambda", "model.rope_base", "train.lr"}) {
    big += fmt::format("\"{}\" = [", key);
    for (int v = 1; v <= 101; ++v) big += fmt::format("{}{}", v > 1 ? ", " : "", v);
    big += "]\n";
  }
  CHECK_THAT(error_of(big), Contains("the grid has 1030301 runs, more than study.max_runs = 1000"));
  CHECK_THAT(error_of("[study]\nmax_runs = 0\n"), Contains("study.max_runs must be a positive integer"));
  CHECK_THAT(error_of("[study]\nmax_runs = 1\nseeds = [1, 2]\n"), Contains("the grid has 2 runs"));
}

TEST_CASE("study: a long cell name becomes a short folder name of its own", "[study]") {
  CHECK(study::safe_name("model.lambda=0.1,model.attention=original") ==
        "model.lambda=0.1,model.attention=original");
  const std::string a = "model.rope_base=1" + std::string(300, '0'), b = a + "1";
  const std::string sa = study::safe_name(a), sb = study::safe_name(b);
  CHECK(sa.size() == 97);  // 80 bytes, '-', 16 hex digits
  CHECK(sa.substr(0, 80) == a.substr(0, 80));
  CHECK(sa != sb);
  // A plan of such a value: every folder name of its run ids fits NAME_MAX (255).
  const std::string dir = temp_dir("long");
  const std::string f =
      write(dir, "s.toml",
            "[study]\n" + kTinyOverrides + "[axes]\n\"data.path\" = [\"" + std::string(300, 'p') + "\"]\n");
  for (const study::PlannedRun& r : study::plan_study(study::load_study(f), dir + "/out"))
    for (const auto& part : std::filesystem::path(r.id)) CHECK(part.string().size() <= 255);
}

TEST_CASE("study: values apart only in replaced characters keep run folders of their own", "[study]") {
  const std::string dir = temp_dir("collide");
  const std::string f = write(dir, "s.toml", "[study]\n" + kTinyOverrides + R"(
[axes]
"data.text_field" = ["a b", "a_b", "a/b", "café", "cafè"]
)");
  const std::vector<study::PlannedRun> plan = study::plan_study(study::load_study(f), dir + "/out");
  REQUIRE(plan.size() == 5);
  std::set<std::string> ids;
  for (const study::PlannedRun& r : plan) ids.insert(r.id);
  CHECK(ids.size() == 5);
  CHECK(plan[1].id == "data.text_field=a_b/seed-0");  // a clean value's folder is its name
  CHECK_THAT(plan[0].id, Catch::Matches("data\\.text_field=a_b-[0-9a-f]{8}/seed-0"));
  CHECK(plan[0].cell == "data.text_field=a b");
  // Two values whose 8 hex digits collide as well (found by search) are refused before any run.
  const std::string g = write(dir, "c.toml", "[study]\n" + kTinyOverrides + R"(
[axes]
"data.text_field" = ["x   /_  /    /", "x  ____ _ /   "]
)");
  CHECK_THROWS_WITH(
      study::plan_study(study::load_study(g), dir + "/out2"),
      Contains("c.toml: the cells 'data.text_field=x   /_  /    /' and 'data.text_field=x  ____ _ /   ' "
               "map to one run folder"));
}

TEST_CASE("study: the variants table bundles overrides into one axis, compared with its baseline",
          "[study]") {
  const std::string dir = temp_dir("variants");
  const std::string file = write(dir, "v.toml", "[study]\nseeds = [1, 2]\n" + kTinyOverrides + R"(
[variants]
original = []
entropy = ["train.regularizer=entropy", "train.regularizer_coef=0.5"]
bp_high = ["model.attention=bp_high"]
[axes]
"model.lambda" = [0.1, 0.3]
)");
  const study::StudySpec s = study::load_study(file);
  CHECK(s.compare_key == "variant");  // the default once the file has [variants]
  CHECK(s.baseline == "original");
  REQUIRE(s.variants.size() == 3);
  CHECK(s.variants[1].first == "entropy");  // the file's order
  const std::vector<study::PlannedRun> plan = study::plan_study(s, dir + "/out");
  REQUIRE(plan.size() == 12);  // 3 variants x 2 lambdas x 2 seeds
  CHECK(plan[0].id == "variant=original,model.lambda=0.1/seed-1");
  CHECK(plan[4].cell == "variant=entropy,model.lambda=0.1");
  // A variant's bundle takes the axis's place among the overrides, ahead of the later axes.
  const std::vector<std::string> o = study::run_overrides(s, plan[4]);
  const std::vector<std::string> tail(o.end() - 5, o.end());
  CHECK(tail == std::vector<std::string>{"train.regularizer=entropy", "train.regularizer_coef=0.5",
                                         "model.lambda=0.1", "train.seed=1",
                                         "train.run_dir=\"" + plan[4].run_dir + "\""});
  CHECK(study::run_overrides(s, plan[0]).size() == s.overrides.size() + 3);  // original: no bundle

  // The paired test pairs each variant with `original` at the same lambda and seed.
  std::vector<study::RunRecord> runs;
  for (size_t i = 0; i < plan.size(); ++i)
    runs.push_back({plan[i].id,
                    plan[i].cell,
                    "pretrain",
                    "",
                    plan[i].seed,
                    plan[i].axes,
                    {{"loss", static_cast<double>(i)}}});
  const nlohmann::json t = study::aggregate(s, runs);
  const nlohmann::json& ent = t["cells"][2];
  CHECK(ent["cell"] == "variant=entropy,model.lambda=0.1");
  CHECK(ent["baseline_cell"] == "variant=original,model.lambda=0.1");
  CHECK(ent["paired"][0]["mean"].get<double>() == 4.0);  // runs 4, 5 against 0, 1
  CHECK_FALSE(t["cells"][0].contains("paired"));

  auto error_of = [&](const std::string& text) {
    try {
      study::load_study(write(dir, "bad.toml", text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("[variants]\nsoftmax = []\n"), Contains("bad.toml") && Contains("'original'"));
  CHECK_THAT(error_of("[variants]\noriginal = []\nx = [\"attention=bp_high\"]\n"),
             Contains("variants.x (line 3)") && Contains("section.key=value"));
  CHECK_THAT(error_of("[variants]\noriginal = [1]\n"), Contains("variants.original"));
  CHECK_THAT(error_of("[variants]\n"), Contains("non-empty table"));
}

TEST_CASE("study: the last complete checkpoint of a run folder", "[study]") {
  const std::string dir = temp_dir("ckpt");
  for (const char* c : {"checkpoint-20", "checkpoint-100", "checkpoint-40"}) {
    fs::create_directories(fs::path(dir) / c);
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
      write(dir + "/" + c, f, "x");
  }
  fs::remove(fs::path(dir) / "checkpoint-100" / "trainer_state.json");  // incomplete: not chosen
  CHECK(fs::path(study::last_checkpoint(dir)).filename() == "checkpoint-40");
  CHECK(study::last_checkpoint(dir + "/none").empty());
}

TEST_CASE("study: correlation of two metrics over a run's evaluations", "[study]") {
  const std::string dir = temp_dir("corr");
  // entropy_L1 = {1,2,3,4}, accuracy = {1,3,2,4}: r = 0.8, p = 0.2, rho = 0.8 (tests/core/
  // test_stats.cpp works these out); one line without accuracy is left out.
  write(dir, "metrics.jsonl",
        "{\"step\":1,\"loss\":5}\n"
        "{\"step\":2,\"eval_loss\":1,\"eval_accuracy\":1,\"eval_entropy\":[0,1]}\n"
        "{\"step\":4,\"eval_loss\":1,\"eval_accuracy\":3,\"eval_entropy\":[0,2]}\n"
        "{\"step\":6,\"eval_loss\":1,\"eval_accuracy\":2,\"eval_entropy\":[0,3]}\n"
        "{\"step\":8,\"eval_loss\":1,\"eval_accuracy\":4,\"eval_entropy\":[0,4]}\n"
        "{\"step\":9,\"eval_loss\":1,\"eval_entropy\":[0,5]}\n");
  const nlohmann::json c = study::correlate_sources({dir}, "entropy_L1", "accuracy");
  CHECK(c["over"] == "checkpoints");
  CHECK(c["n"] == 4);
  CHECK(c["left_out"] == 1);
  CHECK(c["pearson_r"].get<double>() == near(0.8));
  CHECK(c["pearson_p"].get<double>() == near(0.2));
  CHECK(c["spearman_rho"].get<double>() == near(0.8));
  CHECK(c["points"][1]["label"] == "step 4");
  // --from-step 4: steps 4, 6, 8 (entropy 2, 3, 4 against accuracy 3, 2, 4): r = 1 / (√2 √2) = 0.5.
  study::CorrelateOptions late;
  late.from_step = 4;
  const nlohmann::json l = study::correlate_sources({dir}, "entropy_L1", "accuracy", late);
  CHECK(l["n"] == 3);
  CHECK(l["pearson_r"].get<double>() == near(0.5));
  CHECK(l["points"][0]["label"] == "step 4");
  // A name no evaluation has is unknown, and the message lists those there are.
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd_L0", "accuracy"),
                    Contains("no metric 'gtd_L0' in " + dir +
                             "; the metrics with values there: accuracy, "
                             "entropy_L0, entropy_L1, loss"));
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "accuracy", "nosuch"), Contains("no metric 'nosuch'"));
  study::CorrelateOptions last;
  last.from_step = 9;  // entropy but no accuracy there: a known name with too few points
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "entropy_L1", "accuracy", last), Contains("0 point(s)"));
  CHECK_THROWS_WITH(study::correlate_sources({dir + "/nothing"}, "a", "b"),
                    Contains("neither a study folder"));
}

TEST_CASE("study: correlation over the (sample, layer, head) rows of an analysis", "[study]") {
  const std::string dir = temp_dir("corr-rows");
  // B's gtd = {1,2,3,4} and clustering = {1,3,2,4} over the 4 (sample, head) pairs of layer 0:
  // r = 0.8, p = 0.2, rho = 0.8 as above. A's rows and layer 1 carry other values, to be ignored
  // (--layer 0) or picked (A.gtd); sample 1 head 1 has no clustering (nan): left out in layer 1.
  std::string csv = "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n";
  const double gtd[4] = {1, 2, 3, 4}, cc[4] = {1, 3, 2, 4};
  for (int s = 0; s < 2; ++s)
    for (int l = 0; l < 2; ++l)
      for (const char* m : {"A", "B"})
        for (int h = 0; h < 2; ++h) {
          const int k = 2 * s + h;
          const bool b = m[0] == 'B';
          const double g = l == 0 ? (b ? gtd[k] : 10 - gtd[k]) : 5 + k;
          const std::string c =
              l == 1 && s == 1 && h == 1 ? "nan" : fmt::format("{}", l == 0 ? cc[k] : 7.0 * k);
          csv += fmt::format("{},{},{},{},12,0.5,{},{},0\n", s, l, m, h, g, c);
        }
  write(dir, "per_sample.csv", csv);
  write(dir, "analysis.json", R"({"options": {"graph_tau": 0.01, "graph_nodes": 20}})");
  study::CorrelateOptions only0;
  only0.layers = {0};
  const nlohmann::json c = study::correlate_sources({dir}, "gtd", "clustering", only0);
  CHECK(c["over"] == "(sample, layer, head) rows");
  CHECK(c["n"] == 4);
  CHECK(c["left_out"] == 0);
  CHECK(c["pearson_r"].get<double>() == near(0.8));
  CHECK(c["pearson_p"].get<double>() == near(0.2));
  CHECK(c["spearman_rho"].get<double>() == near(0.8));
  CHECK(c["points"][2]["label"] == "sample 1 L0 H0");
  CHECK(c["graph"][dir]["graph_tau"] == 0.01);
  CHECK(c["graph"][dir]["graph_nodes"] == 20);
  // analysis.json is read through its schema: a τ that is not a number is named.
  write(dir, "analysis.json", R"({"options": {"graph_tau": "0.01"}})");
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "clustering", only0),
                    Contains("analysis.json: options: graph_tau"));
  write(dir, "analysis.json", R"({"options": {"graph_tau": 0.01, "graph_nodes": 20}})");
  // A.gtd = 10 - B's gtd: r = -0.8 against B's clustering.
  CHECK(study::correlate_sources({dir}, "A.gtd", "B.clustering", only0)["pearson_r"].get<double>() ==
        near(-0.8));
  // Every layer: 8 pairs, the nan one left out.
  const nlohmann::json all = study::correlate_sources({dir}, "gtd", "clustering");
  CHECK(all["n"] == 7);
  CHECK(all["left_out"] == 1);
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "sinky"), Contains("[A.|B.]NAME"));
  // Malformed files name the file and line.
  write(dir, "per_sample.csv",
        "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n0,0,C,0,1,1,1,1,1\n");
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "entropy"),
                    Contains("per_sample.csv:2: map \"C\""));
  write(dir, "per_sample.csv",
        "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n0,0,B,0,1,x,1,1,1\n");
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "entropy"),
                    Contains("per_sample.csv:2: entropy \"x\""));
  write(dir, "per_sample.csv", "sample,layer,map,head\n");
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "entropy"),
                    Contains("per_sample.csv:1: the header"));
  write(dir, "per_sample.csv",
        "sample,layer,map,head,tokens,entropy,gtd,clustering,betweenness\n0,0,B,0,1,1\n");
  CHECK_THROWS_WITH(study::correlate_sources({dir}, "gtd", "entropy"),
                    Contains("per_sample.csv:2: 6 fields"));
}

TEST_CASE("study: the study files under configs/studies/ load and plan", "[study]") {
  const std::string out = temp_dir("configs");
  for (const auto& e : fs::directory_iterator(std::string(SAOBP_SOURCE_DIR) + "/configs/studies")) {
    INFO(e.path());
    const study::StudySpec s = study::load_study(e.path().string());
    CHECK_FALSE(study::plan_study(s, out).empty());
  }
}
