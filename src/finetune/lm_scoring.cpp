// A decoder's language-model scores on the benchmarks (`saobp eval --task ... --zero-shot`,
// `saobp eval --task wikitext`):
//
// Zero-shot choice: each candidate c of an example is scored by log p(c | prompt) = Σ over the
// candidate's tokens of log softmax(logits)[token], the sum and the sum divided by the
// candidate's token count (the length-normalized score); the prediction is the argmax of each,
// and both accuracies are reported (the paper's Table 7 protocol for RACE and BoolQ). Prompts:
//   race/*     "Article: {article}\n\nQuestion: {question}\n\nAnswer:"  candidates " {option}"
//   boolq      "{passage}\nQuestion: {question}?\nAnswer:"            candidates " yes", " no"
//   hellaswag  "{ctx}"                                                 candidates " {ending}"
// A prompt longer than the window loses tokens at its start (the end, nearest the answer,
// stays).
//
// Perplexity: the split's text is tokenized whole, <|endoftext|> first, so that every token of
// the split is predicted. Windows of L = train.seq_len tokens start S = data.window_stride
// tokens apart (a window starts no later than the token before the first one it scores, so
// that token has context even when S = L); window [b, b + L) scores the tokens not scored by
// an earlier window, each with the context of the window before it (Hugging Face's
// "perplexity of fixed-length models" method). perplexity = exp(Σ nll / tokens scored), tokens scored =
// tokens of the split.
#include "finetune/lm_scoring.h"

#include <chrono>
#include <cmath>

#include "autograd/ops.h"

namespace saobp::finetune {

namespace {

// One row through the model: ids, and the positions whose next token is scored.
struct Row {
  std::vector<int32_t> ids;
  int64_t first = 0, count = 0;  // score ids[first + 1 .. first + count] from positions first ..
  size_t owner = 0;              // the score it adds to
};

// Σ log p(ids[p + 1] | ids[..p]) over each row's scored positions, added to sums[row.owner].
void score_rows(GPT2LMHeadModel& model, const std::vector<Row>& rows, int32_t pad,
                std::vector<double>& sums) {
  NoGradGuard ng;
  const int64_t R = static_cast<int64_t>(rows.size());
  int64_t T = 1;
  for (const Row& r : rows) T = std::max<int64_t>(T, static_cast<int64_t>(r.ids.size()));
  std::vector<int32_t> ids(static_cast<size_t>(R * T), pad), picked, targets;
  std::vector<uint8_t> mask(static_cast<size_t>(R * T), 0);
  for (int64_t i = 0; i < R; ++i) {
    const Row& r = rows[static_cast<size_t>(i)];
    std::copy(r.ids.begin(), r.ids.end(), ids.begin() + i * T);
    std::fill_n(mask.begin() + i * T, r.ids.size(), uint8_t{1});
    for (int64_t p = r.first; p < r.first + r.count; ++p) {
      picked.push_back(static_cast<int32_t>(i * T + p));
      targets.push_back(r.ids[static_cast<size_t>(p + 1)]);
    }
  }
  const Var h = model.hidden(Tensor::from_vector(ids, {R, T}), Tensor::from_vector(mask, {R, T}), false, 0);
  const int64_t N = static_cast<int64_t>(picked.size());
  const Var logits =
      model.lm_head(embedding(reshape(h, {-1, h.size(-1)}), Tensor::from_vector(picked, {N}, h.device())));
  const std::vector<float> l = logits.data().to_vector<float>();
  const int64_t V = logits.size(-1);
  int64_t k = 0;
  for (const Row& r : rows)
    for (int64_t p = 0; p < r.count; ++p, ++k) {
      const float* row = l.data() + k * V;
      const double mx = *std::max_element(row, row + V);
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
      sums[r.owner] += static_cast<double>(row[targets[static_cast<size_t>(k)]]) - mx - std::log(z);
    }
}

}  // namespace

ZeroShotResult zero_shot_choice(GPT2LMHeadModel& model, const Tokenizer& tok,
                                const std::vector<ZeroShotExample>& ex, int64_t max_length, int64_t batch) {
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t pad = std::max(tok.special().eos, 0);
  ZeroShotResult res;
  std::vector<Row> rows;
  std::vector<double> sums;
  std::vector<int64_t> lengths;
  auto flush = [&] {
    if (!rows.empty()) score_rows(model, rows, pad, sums);
    rows.clear();
  };
  for (const ZeroShotExample& e : ex) {
    std::vector<int32_t> prompt = tok.encode(e.prompt);
    for (const std::string& c : e.candidates) {
      const std::vector<int32_t> cand = tok.encode(c);
      if (cand.empty()) fail("zero-shot", "example {}: candidate \"{}\" has no tokens", e.id, c);
      if (static_cast<int64_t>(cand.size()) >= max_length)
        fail("zero-shot", "example {}: candidate of {} tokens does not fit the window of {}", e.id,
             cand.size(), max_length);
      const size_t keep = std::min(prompt.size(), static_cast<size_t>(max_length) - cand.size());
      if (keep < prompt.size()) ++res.truncated;
      Row r;
      r.ids.assign(prompt.end() - static_cast<ptrdiff_t>(keep), prompt.end());
      if (r.ids.empty()) r.ids.push_back(pad);  // an empty prompt: the end-of-text token
      r.first = static_cast<int64_t>(r.ids.size()) - 1, r.count = static_cast<int64_t>(cand.size());
      r.ids.insert(r.ids.end(), cand.begin(), cand.end());
      r.owner = sums.size();
      sums.push_back(0), lengths.push_back(r.count);
      rows.push_back(std::move(r));
      if (static_cast<int64_t>(rows.size()) >= batch) flush();
    }
  }
  flush();
  size_t k = 0;
  int64_t right_sum = 0, right_norm = 0, labeled = 0;
  for (const ZeroShotExample& e : ex) {
    int32_t best_sum = 0, best_norm = 0;
    for (size_t c = 0; c < e.candidates.size(); ++c) {
      const double s = sums[k + c], n = s / static_cast<double>(lengths[k + c]);
      if (s > sums[k + static_cast<size_t>(best_sum)]) best_sum = static_cast<int32_t>(c);
      if (n > sums[k + static_cast<size_t>(best_norm)] /
                  static_cast<double>(lengths[k + static_cast<size_t>(best_norm)]))
        best_norm = static_cast<int32_t>(c);
    }
    k += e.candidates.size();
    res.pred_sum.push_back(best_sum), res.pred_norm.push_back(best_norm);
    if (e.label >= 0) ++labeled, right_sum += best_sum == e.label, right_norm += best_norm == e.label;
  }
  res.examples = static_cast<int64_t>(ex.size());
  res.log_likelihood = std::move(sums), res.tokens = std::move(lengths);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.metrics = {{"accuracy", labeled ? static_cast<double>(right_sum) / static_cast<double>(labeled) : 0.0},
                 {"accuracy_length_normalized",
                  labeled ? static_cast<double>(right_norm) / static_cast<double>(labeled) : 0.0},
                 {"examples", res.examples},
                 {"truncated_prompts", res.truncated},
                 {"examples_per_s", static_cast<double>(res.examples) / std::max(res.seconds, 1e-9)}};
  return res;
}

nlohmann::json sliding_window_perplexity(GPT2LMHeadModel& model, const Tokenizer& tok,
                                         const std::string& text, int64_t max_length, int64_t stride,
                                         int64_t batch) {
  if (stride <= 0 || stride > max_length)
    fail("perplexity", "data.window_stride must be in [1, train.seq_len = {}], got {}", max_length, stride);
  if (max_length < 2) fail("perplexity", "train.seq_len must be >= 2, got {}", max_length);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids;
  const int32_t eos = tok.special().eos;
  if (eos >= 0) ids.push_back(eos);
  const std::vector<int32_t> body = tok.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  const int64_t N = static_cast<int64_t>(ids.size());
  if (N < 2) fail("perplexity", "the text has {} tokens; nothing to score", body.size());
  std::vector<double> sums(1, 0.0);
  std::vector<Row> rows;
  int64_t scored = 0, windows = 0, next = 1;  // next: the first token not yet scored
  for (int64_t start = 0; next < N; start += stride) {
    const int64_t begin = std::min(start, next - 1);  // the token before the first scored one is context
    const int64_t end = std::min(begin + max_length, N);
    Row r;
    r.ids.assign(ids.begin() + begin, ids.begin() + end);
    r.first = next - 1 - begin, r.count = end - next;
    scored += r.count, next = end, ++windows;
    rows.push_back(std::move(r));
    if (static_cast<int64_t>(rows.size()) >= batch)
      score_rows(model, rows, std::max(eos, 0), sums), rows.clear();
  }
  if (!rows.empty()) score_rows(model, rows, std::max(eos, 0), sums);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"perplexity", std::exp(-sums[0] / static_cast<double>(scored))},
          {"nll_per_token", -sums[0] / static_cast<double>(scored)},
          {"tokens", scored},
          {"windows", windows},
          {"max_length", max_length},
          {"stride", stride},
          {"tokens_per_s", static_cast<double>(scored) / std::max(secs, 1e-9)}};
}

}  // namespace saobp::finetune
