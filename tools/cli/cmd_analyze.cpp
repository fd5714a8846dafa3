// `saobp analyze --checkpoint DIR [--data SPEC] [--samples N] [--per-sample]`: every attention
// diagnostic of a checkpoint over N held-out sequences (or N rows of a benchmark's split, as
// fine-tuning feeds them), into analysis.json and CSV tables; and
// `saobp inspect --checkpoint DIR (--text "..." | --ids 1,2,3)`: one input through the model,
// written as safetensors (tokens, every layer's A and B, hidden states, logits).
#include <chrono>
#include <filesystem>

#include "cli/commands.h"
#include "finetune/benchmark.h"
#include "finetune/finetune.h"
#include "train/analysis.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace saobp::cli {

namespace {

namespace fs = std::filesystem;

struct AnalyzeCli {
  std::string checkpoint, data = "valid", out, device, split;
  int64_t samples = 1024, max_length = 0;
  double graph_tau = 1e-4;
  int graph_nodes = 40, layer_group = 4;
  bool no_graph = false, per_sample = false;
  std::vector<std::string> overrides;
};

// A benchmark name of `saobp finetune` before --data's colon (TASK:DIR): rows of its split.
bool benchmark_data(const std::string& data) {
  const size_t colon = data.find(':');
  if (colon == std::string::npos) return false;
  const std::vector<std::string> names = finetune::benchmark_names();
  const std::string kind = data.substr(0, colon);
  return kind != "wikitext" && std::find(names.begin(), names.end(), kind) != names.end();
}

// --data: "valid" (the checkpoint's own held-out split), KIND:PATH, a corpus in one of the
// formats of docs/data.md, read with the checkpoint's tokenizer (only its held-out split is
// tokenized, into a temporary file: data_setup.h), or TASK:DIR, a benchmark (its rows are made by
// finetune::benchmark_rows; the checkpoint's own data is not read).
std::vector<std::string> data_overrides(const AnalyzeCli& o, const std::string& out) {
  std::vector<std::string> ov = with_device(o.overrides, o.device);
  if (o.data == "valid" || benchmark_data(o.data)) return ov;
  if (o.data == "synthetic") return ov.push_back("data.kind=synthetic"), ov;
  const size_t colon = o.data.find(':');
  if (colon == std::string::npos || colon == 0)
    fail(
        "analyze",
        "--data '{}': expected \"valid\", \"synthetic\", KIND:PATH (KIND: text, fortune, wikitext, jsonl) or "
        "TASK:DIR (TASK: a benchmark of saobp finetune)",
        o.data);
  ov.push_back("data.kind=" + o.data.substr(0, colon));
  ov.push_back(exact_string_override("data.path", o.data.substr(colon + 1), "--data"));
  // Anything the data would write (a vocabulary, for a checkpoint without a tokenizer) goes here.
  ov.push_back(exact_string_override("train.run_dir", (fs::path(out) / "data").string(), "--out"));
  return ov;
}

int run_analyze(const AnalyzeCli& o) {
  const std::string out = o.out.empty() ? (fs::path(o.checkpoint) / "analysis").string() : o.out;
  const size_t task_colon = o.data.find(':');  // --data TASK:DIR reads DIR
  refuse_output_over_inputs(
      out, "--out", {o.checkpoint, task_colon == std::string::npos ? o.data : o.data.substr(task_colon + 1)});
  AnalysisOptions opt;
  opt.samples = o.samples;
  opt.graph_metrics = !o.no_graph;
  opt.per_sample = o.per_sample;
  opt.graph_tau = o.graph_tau, opt.graph_nodes = o.graph_nodes;
  opt.layer_group = o.layer_group;
  opt.overrides = data_overrides(o, out);
  const bool bench = benchmark_data(o.data);
  if (!bench && (!o.split.empty() || o.max_length > 0))
    fail("analyze", "--split and --max-length choose a benchmark's rows: --data TASK:DIR");
  if (bench) {
    const size_t colon = o.data.find(':');
    opt.inputs = finetune::benchmark_rows(o.checkpoint, o.data.substr(0, colon), o.data.substr(colon + 1),
                                          o.split, o.max_length);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const DiagnosticsReport r = analyze_checkpoint(o.checkpoint, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_analysis(r, o.checkpoint, out);
  if (!r.data.is_null())
    fmt::print("analyze: {} {} split: {} examples, {} rows of at most {} tokens ({} cut)\n",
               r.data["task"].get<std::string>(), r.data["split"].get<std::string>(),
               r.data["examples"].get<int64_t>(), r.data["rows"].get<int64_t>(),
               r.data["max_length"].get<int64_t>(), r.data["truncated"].get<int64_t>());
  if (r.samples < o.samples)
    fmt::print(stderr, "analyze: --samples {}: the {} has {} sequences, all of them used\n", o.samples,
               r.data.is_null() ? "held-out set" : "split", r.samples);
  fmt::print("analyze: {} samples of {} in {:.1f} s ({} layers x {} heads); A = softmax, B = refined\n",
             r.samples, o.checkpoint, secs, r.layers, r.heads);
  fmt::print("{:>5} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7}\n", "layer", "H(A)", "H(B)",
             "GTD(A)", "GTD(B)", "Hind(B)", "sparse(B)", "CC(B)", "BC(B)", "sinky(B)", "xGTD(B)");
  for (int64_t l = 0; l < r.layers; ++l) {
    const HeadDiagnostics &a = r.attn.layers[static_cast<size_t>(l)],
                          &b = r.probs.layers[static_cast<size_t>(l)];
    fmt::print(
        "{:>5} {:>9.4f} {:>9.4f} {:>7.4f} {:>7.4f} {:>9.4f} {:>9.4f} {:>8.4f} {:>8.2f} {:>8.3f} {:>7.4f}\n",
        l, a.entropy, b.entropy, a.gtd, b.gtd, b.indirect_entropy, b.sparsity, b.clustering, b.betweenness,
        b.sinky_rate, r.probs.cross_gtd[static_cast<size_t>(l)]);
  }
  if (!r.skip_rate.empty()) {
    fmt::print("head skip: fraction of (sample, head) pairs skipped per layer:");
    for (double x : r.skip_rate) fmt::print(" {:.4f}", x);
    fmt::print("\n");
  }
  // The head-skip note's table: per group of layers, the share of sinky (and skipped) heads and
  // the value norms of sink tokens vs the others, and of sinky heads vs the others (A's).
  const std::vector<SinkGroup> ga = sink_groups(r.attn, r.skip_rate, r.options.layer_group),
                               gb = sink_groups(r.probs, r.skip_rate, r.options.layer_group);
  fmt::print("sink heads per layer group (shares of (sample, layer, head); |v| mean value norms, A's):\n");
  fmt::print("{:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>10} {:>10}\n", "layers", "sinky(A)", "sinky(B)",
             "skipped", "|v|sink", "|v|other", "dv", "|v|sinkyH", "|v|otherH");
  for (size_t g = 0; g < ga.size(); ++g) {
    const SinkGroup& a = ga[g];
    const std::string name =
        g + 1 == ga.size() ? std::string("all") : fmt::format("{}-{}", a.first_layer, a.last_layer);
    fmt::print("{:>9} {:>9.4f} {:>9.4f} {:>8.4f} {:>9.4f} {:>9.4f} {:>8.4f} {:>10.4f} {:>10.4f}\n", name,
               a.sinky_share, gb[g].sinky_share, a.skip_share, a.sink_value_norm, a.other_value_norm,
               a.value_norm_delta, a.sinky_head_value_norm, a.other_head_value_norm);
  }
  // Positional heads: most of a head's mass on the token itself or on the one before.
  std::vector<std::string> positional;
  for (int64_t l = 0; l < r.layers; ++l)
    for (int64_t h = 0; h < r.heads; ++h) {
      const HeadDiagnostics& d = r.probs.heads[static_cast<size_t>(l)][static_cast<size_t>(h)];
      if (d.diagonal > 0.5) positional.push_back(fmt::format("L{}H{} diagonal {:.2f}", l, h, d.diagonal));
      if (d.previous > 0.5) positional.push_back(fmt::format("L{}H{} previous {:.2f}", l, h, d.previous));
    }
  fmt::print("positional heads (B, mean mass > 0.5 on the token itself or the one before): {}\n",
             positional.empty() ? std::string("none") : fmt::format("{}", fmt::join(positional, ", ")));
  if (r.rope) {
    const RopeReport& rp = *r.rope;
    const auto slow = std::count_if(rp.wavelength.begin(), rp.wavelength.end(),
                                    [&](double w) { return w > static_cast<double>(rp.seq_len); });
    fmt::print(
        "RoPE base {}: {} pairs, wavelengths {:.3g} to {:.3g}; share of |q||k| in the {} pairs slower than "
        "T = {} per layer:",
        rp.base, rp.theta.size(), rp.wavelength.front(), rp.wavelength.back(), slow, rp.seq_len);
    for (double s : rp.slow_share()) fmt::print(" {:.3f}", s);
    fmt::print(" (equal norms: {:.3f})",
               static_cast<double>(slow) / static_cast<double>(rp.wavelength.size()));
    const auto at = [&](int64_t m) {
      for (size_t i = 0; i < rp.distances.size(); ++i)
        if (rp.distances[i] >= m)
          return fmt::format("{:.3f} at {}", rp.bound[i] / rp.bound.front(), rp.distances[i]);
      return std::string("-");
    };
    fmt::print("\ndecay bound relative to distance 0: {}, {}, {}\n", at(16), at(128),
               at(rp.distances.back()));
  }
  fmt::print("wrote {}/analysis.json, layers.csv, heads.csv, positions.csv{}{}\n", out,
             o.per_sample ? ", per_sample.csv" : "", r.rope ? ", rope_bands.csv, rope_decay.csv" : "");
  return 0;
}

struct InspectCli {
  std::string checkpoint, text, ids, out, device;
  int64_t sample = -1;
  CLI::Option *text_opt = nullptr, *ids_opt = nullptr, *sample_opt = nullptr;
};

int run_inspect(const InspectCli& o) {
  const bool has_text = o.text_opt->count() > 0, has_ids = o.ids_opt->count() > 0,
             has_sample = o.sample_opt->count() > 0;
  if (has_text + has_ids + has_sample != 1)
    fail("inspect", "give exactly one of --text, --ids and --sample ({} given)",
         has_text + has_ids + has_sample);
  if (has_text && o.text.empty()) fail("inspect", "--text is empty: give the text to run through the model");
  refuse_output_over_inputs(o.out, "--out", {o.checkpoint});
  const std::vector<int32_t> ids = has_ids ? parse_ids("--ids", o.ids) : std::vector<int32_t>{};
  const std::vector<std::string> overrides = with_device({}, o.device);
  const Inspection in = has_sample ? inspect_sample(o.checkpoint, o.sample, overrides)
                                   : inspect_checkpoint(o.checkpoint, o.text, ids, overrides);
  // The dump goes to the working directory unless --out says where: a read-only command writes
  // nothing into the checkpoint it reads.
  const std::string out = o.out.empty() ? "inspect.safetensors" : o.out;
  write_inspection(in, out);
  fmt::print("inspect: {} tokens:", in.ids.size());
  for (size_t i = 0; i < in.tokens.size() && i < 32; ++i) fmt::print(" {}", in.tokens[i]);
  fmt::print("{}\n", in.tokens.size() > 32 ? " ..." : "");
  for (size_t l = 0; l < in.maps.size(); ++l) {
    const Tensor a = in.maps[l].attn.to(DType::f64), b = in.maps[l].probs.to(DType::f64);
    const int64_t NH = a.size(1), T = a.size(2);
    // Per head: the key each head's first query attends most (A and B) and the max weight.
    fmt::print("layer {}:", l);
    const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
    for (int64_t h = 0; h < NH; ++h) {
      double amax = 0, bmax = 0;
      for (int64_t k = 0; k < T * T; ++k)
        amax = std::max(amax, av[static_cast<size_t>(h * T * T + k)]),
        bmax = std::max(bmax, bv[static_cast<size_t>(h * T * T + k)]);
      fmt::print("  head {} max A {:.3f} B {:.3f}", h, amax, bmax);
    }
    fmt::print("\n");
  }
  fmt::print("hidden states: {} tensors of {}; logits {}\nwrote {}\n", in.hidden.size(),
             in.hidden.empty() ? "-" : in.hidden.front().str(), in.logits.str(), out);
  return 0;
}

}  // namespace

void register_analyze(CLI::App& app) {
  static AnalyzeCli a;
  CLI::App* sub = app.add_subcommand(
      "analyze", "Attention diagnostics of a checkpoint (entropy, GTD, sparsity, CC/BC, sinks)");
  sub->add_option("--checkpoint", a.checkpoint, "checkpoint directory")->required();
  sub->add_option("--data", a.data,
                  "valid (its held-out split), synthetic, KIND:PATH of a corpus, or TASK:DIR of a benchmark");
  sub->add_option("--samples", a.samples, "sequences averaged (at most the held-out set or the split's rows)")
      ->check(in_range(1, kMaxAnalyzeSamples));
  sub->add_option("--split", a.split,
                  "TASK:DIR: the split read (default: the task's first evaluation split)");
  sub->add_option("--max-length", a.max_length,
                  "TASK:DIR: tokens per row (default: the task's recipe, fitted to the model)")
      ->check(in_range(2, 1 << 20));
  sub->add_option("--out", a.out, "output folder (default CHECKPOINT/analysis)")->check(non_empty_path());
  sub->add_flag("--no-graph", a.no_graph, "skip clustering and betweenness");
  sub->add_option("--graph-tau", a.graph_tau,
                  "attention graph: an edge where max(A_ij, A_ji) >= tau (default 1e-4)")
      ->check(in_range(0, 1));
  sub->add_option("--graph-nodes", a.graph_nodes, "attention graph: its first N tokens (default 40)")
      ->check(in_range(2, 1 << 16));
  sub->add_option("--layer-group", a.layer_group,
                  "sink statistics: consecutive layers per group (default 4, the head-skip note's)")
      ->check(in_range(1, 1 << 16));
  sub->add_flag("--per-sample", a.per_sample,
                "also write per_sample.csv: entropy, GTD, CC, BC of every (sample, layer, map, head)");
  add_device_option(sub, a.device);
  sub->add_option("overrides", a.overrides, "section.key=value settings on the checkpoint's config");
  add_command(sub, [] { return run_analyze(a); });

  static InspectCli i;
  CLI::App* ins = app.add_subcommand(
      "inspect", "One input through a checkpoint: tokens, A and B per layer, hidden states, logits");
  ins->add_option("--checkpoint", i.checkpoint, "checkpoint directory")->required();
  i.text_opt = ins->add_option("--text", i.text, "text, tokenized with the checkpoint's tokenizer");
  i.ids_opt = ins->add_option("--ids", i.ids, "token ids, comma-separated");
  i.sample_opt =
      ins->add_option("--sample", i.sample, "sample N of the checkpoint's held-out set")->check(at_least(0));
  ins->add_option("--out", i.out, "output file (default inspect.safetensors in the working directory)")
      ->check(non_empty_path());
  add_device_option(ins, i.device);
  add_command(ins, [] { return run_inspect(i); });
}

}  // namespace saobp::cli
