#include "train/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "tensor/philox.h"

namespace saobp {

void SamplingOptions::validate() const {
  if (greedy) return;
  if (!(temperature > 0 && std::isfinite(temperature)))
    fail("generate", "--temperature must be a finite number > 0, got {}", temperature);
  if (top_k < 0) fail("generate", "--top-k must be >= 0 (0 keeps every token), got {}", top_k);
  if (!(top_p > 0 && top_p <= 1)) fail("generate", "--top-p must be in (0, 1], got {}", top_p);
}

namespace {

void check_finite(const std::vector<double>& logits) {
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i]))
      fail("generate", "the model's logit of token {} is {}: the weights or the input are broken", i,
           logits[i]);
}

// The ids in order of decreasing logit, ties by the lower id.
std::vector<int32_t> by_likelihood(const std::vector<double>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  return order;
}

}  // namespace

std::vector<double> next_token_distribution(const std::vector<double>& logits, const SamplingOptions& o) {
  o.validate();
  if (logits.empty()) fail("generate", "no logits (an empty vocabulary)");
  check_finite(logits);
  const std::vector<int32_t> order = by_likelihood(logits);
  size_t kept = order.size();
  if (o.top_k > 0) kept = std::min(kept, static_cast<size_t>(o.top_k));
  // softmax(logits / T) over the kept ids, from the largest logit (exp(0) = 1) down.
  const double top = logits[static_cast<size_t>(order[0])] / o.temperature;
  std::vector<double> p(kept);
  double total = 0;
  for (size_t r = 0; r < kept; ++r)
    total += p[r] = std::exp(logits[static_cast<size_t>(order[r])] / o.temperature - top);
  // The nucleus: the fewest leading ids whose probability reaches top_p (at least one).
  if (o.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < kept && mass < o.top_p * total) mass += p[n++];
    kept = std::max<size_t>(n, 1);
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  }
  std::vector<double> dist(logits.size(), 0.0);
  for (size_t r = 0; r < kept; ++r) dist[static_cast<size_t>(order[r])] = p[r] / total;
  return dist;
}

int32_t next_token(const std::vector<double>& logits, const SamplingOptions& o, double u) {
  if (o.greedy) {
    if (logits.empty()) fail("generate", "no logits (an empty vocabulary)");
    check_finite(logits);
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const std::vector<double> dist = next_token_distribution(logits, o);
  const std::vector<int32_t> order = by_likelihood(dist);
  double sum = 0;
  int32_t last = order.front();
  for (int32_t id : order) {
    const double p = dist[static_cast<size_t>(id)];
    if (p <= 0) break;
    last = id;
    sum += p;
    if (sum > u) return id;
  }
  return last;  // u within rounding of 1
}

double uniform_draw(uint64_t seed, uint64_t stream, uint64_t index) {
  const philox::U4 b = philox::block(seed, stream, index);
  const uint64_t bits = (static_cast<uint64_t>(b.v[0]) << 21) | (static_cast<uint64_t>(b.v[1]) >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Generation generate(Body& body, LmHead& head, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  NoGradGuard no_grad;
  if (!o.sampling.greedy) o.sampling.validate();
  if (o.max_new_tokens < 0) fail("generate", "--max-new-tokens must be >= 0, got {}", o.max_new_tokens);
  const int64_t P = static_cast<int64_t>(prompt.size()), limit = body.shape().max_positions,
                V = body.shape().vocab;
  if (P < 1) fail("generate", "the prompt has no tokens");
  if (P > limit)
    fail("generate", "the prompt has {} tokens; the model reads at most {} (model.n_positions)", P, limit);
  for (int32_t id : prompt)
    if (id < 0 || id >= V) fail("generate", "token id {} is outside the model's vocabulary [0, {})", id, V);
  Generation g;
  g.prompt = prompt;
  DecodeCache cache;
  if (!o.recompute) cache = body.decode_cache(1, std::min(limit, P + std::max<int64_t>(o.max_new_tokens, 1)));
  std::vector<Tensor> rows;   // keep_logits: (n, V) per call
  std::vector<int32_t> seen;  // recompute: the whole sequence so far
  // GPT-2's LM head is tied to the token embedding (V,C): logits = h wteᵀ. For one row, the CPU's
  // product reads wte across its rows at every token (strided loads, 3/4 of a token's time at
  // GPT-2 Mini's 50257 tokens); a (C,V) copy made once per call is read along its rows instead.
  // Each logit is the same chain of fused multiply-adds either way (tensor/cpu/sgemm.cpp), so the
  // bits do not change. With bf16 GEMM inputs the head's own linear runs instead (its rounding).
  Tensor wte_t;
  if (dynamic_cast<CausalLmHead*>(&head) && body.shape().gemm_inputs == GemmInputs::f32)
    wte_t = body.token_embedding().data().transpose(0, 1).contiguous();
  auto logits_of = [&](const Var& h) { return wte_t.defined() ? matmul(h, Var(wte_t)) : head.logits(h); };
  // The logits of the last of n new positions on the host (all n kept when asked).
  auto feed = [&](const std::vector<int32_t>& ids) {
    int64_t n = static_cast<int64_t>(ids.size());
    Var h;
    if (o.recompute) {  // the whole sequence again: its last forward holds every position's logits
      seen.insert(seen.end(), ids.begin(), ids.end());
      n = static_cast<int64_t>(seen.size());
      h = body.hidden(Tensor::from_vector(seen, {1, n}), Tensor(), Tensor(), false, 0);
      rows.clear();
    } else {
      h = body.extend(Tensor::from_vector(ids, {1, n}), cache);  // (1,n,C)
    }
    const Tensor logits = logits_of(o.keep_logits ? h : slice(h, 1, n - 1, n)).data();
    const Tensor host = logits.to(Device::cpu()).to(DType::f64);
    if (o.keep_logits) rows.push_back(host.view({n, V}));
    const std::vector<double> all = host.to_vector<double>();
    return std::vector<double>(all.end() - V, all.end());
  };
  const auto t0 = Clock::now();
  std::vector<double> logits = feed(prompt);
  g.prefill_seconds = since(t0);
  const auto t1 = Clock::now();
  g.stop = "max_new_tokens";
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int32_t tok = next_token(
        logits, o.sampling,
        o.sampling.greedy ? 0.0 : uniform_draw(o.sampling.seed, o.stream, static_cast<uint64_t>(i)));
    if (tok == o.eos) {
      g.stop = "eos";
      break;
    }
    g.tokens.push_back(tok);
    if (i + 1 == o.max_new_tokens) break;
    if (static_cast<int64_t>(g.prompt.size() + g.tokens.size()) - 1 == limit) {
      g.stop = "max_positions";
      break;
    }
    logits = feed({tok});
  }
  g.decode_seconds = since(t1);
  if (o.keep_logits) {
    int64_t N = 0;
    for (const Tensor& r : rows) N += r.size(0);
    g.logits = Tensor::empty({N, V}, DType::f64);
    int64_t at = 0;
    for (const Tensor& r : rows) {
      Tensor dst = g.logits.slice(0, at, at + r.size(0));
      kern::copy(r, dst, false);
      at += r.size(0);
    }
  }
  return g;
}

}  // namespace saobp
