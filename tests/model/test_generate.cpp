// Generation: incremental decoding (attention/incremental.h, Body::extend) against the full
// forward, and the sampling rules of train/generate.h against hand-computed values.
#include <cmath>
#include <numeric>

#include "model/bert.h"
#include "model/gpt2.h"
#include "support.h"
#include "tensor/device_info.h"
#include "train/generate.h"

using namespace saobp;
using namespace saobp::test;

namespace {

struct Case {
  const char* name;
  AttnVariant variant;
  int steps;
  bool learnable;
};

const Case kCases[] = {{"original", AttnVariant::original, 1, false},
                       {"bp_high", AttnVariant::bp_high, 1, false},
                       {"bp_high 2 steps, learnable λ", AttnVariant::bp_high, 2, true},
                       {"bp_low", AttnVariant::bp_low, 1, false},
                       {"bp_low 3 steps", AttnVariant::bp_low, 3, false},
                       {"bp_elemmul", AttnVariant::bp_elemmul, 1, false}};

// Weights at std 0.3 make peaked attention (at GPT-2's 0.02 every row is nearly uniform and the
// refinements barely move it), so a wrong message or cache row shows in the logits.
DecoderConfig gen_config(const Case& c, PositionKind pos) {
  DecoderConfig d;
  d.vocab = 48, d.max_positions = 40, d.hidden = 32, d.layers = 2, d.heads = 4, d.intermediate = 64;
  d.dropout = 0.1;  // eval mode ignores it
  d.init_std = 0.3;
  d.positions = pos;
  d.attention.variant = c.variant;
  d.attention.bp_steps = c.steps;
  d.attention.learnable_lambda = c.learnable;
  d.attention.layer_lambdas = {0.7, 0.3};
  return d;
}

// The logits (T,V) of the whole sequence in one forward (eval mode).
std::vector<double> full_logits(GPT2LMHeadModel& m, const std::vector<int32_t>& ids) {
  NoGradGuard ng;
  const Tensor t = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  return values(m.forward(t, Tensor(), false, 0).data());
}

// The same logits through the cache, fed in chunks of the given sizes (summing to ids.size()).
std::vector<double> incremental_logits(GPT2LMHeadModel& m, const std::vector<int32_t>& ids,
                                       const std::vector<int64_t>& chunks) {
  DecodeCache cache = m.decode_cache(1, static_cast<int64_t>(ids.size()));
  std::vector<double> out;
  size_t at = 0;
  for (int64_t n : chunks) {
    const std::vector<int32_t> part(ids.begin() + static_cast<std::ptrdiff_t>(at),
                                    ids.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(n)));
    const auto v = values(m.extend(Tensor::from_vector(part, {1, n}), cache).data());
    out.insert(out.end(), v.begin(), v.end());
    at += static_cast<size_t>(n);
  }
  CHECK(cache.length() == static_cast<int64_t>(ids.size()));
  return out;
}

}  // namespace

TEST_CASE("generation: the cached logits equal the full forward's, every variant and position kind",
          "[model][generate]") {
  const std::vector<int32_t> ids = tokens(37, 48, 5);
  // A prompt of 6, single tokens, a chunk of 4 in the middle, single tokens to the end.
  std::vector<int64_t> chunks{6};
  for (int i = 0; i < 9; ++i) chunks.push_back(1);
  chunks.push_back(4);
  while (std::accumulate(chunks.begin(), chunks.end(), int64_t{0}) < 37) chunks.push_back(1);
  for (DType dt : {DType::f64, DType::f32})
    for (PositionKind pos : {PositionKind::learned, PositionKind::rope, PositionKind::none})
      for (const Case& c : kCases) {
        INFO(c.name << ", positions " << positions_name(pos) << ", " << dtype_name(dt));
        GPT2LMHeadModel m(gen_config(c, pos), 42, dt);
        const std::vector<double> full = full_logits(m, ids);
        const std::vector<double> inc = incremental_logits(m, ids, chunks);
        const std::vector<double> one = incremental_logits(m, ids, {37});  // the whole sequence as one chunk
        REQUIRE(inc.size() == full.size());
        const double tol = dt == DType::f64 ? 1e-11 : 1e-5;
        CHECK(max_abs_diff(inc, full) < tol);
        CHECK(max_abs_diff(one, full) < tol);
        if (c.variant != AttnVariant::original) {
          // The refinement moves the logits: the comparison above is not original's twice.
          Case o = c;
          o.variant = AttnVariant::original;
          GPT2LMHeadModel plain(gen_config(o, pos), 42, dt);
          CHECK(max_abs_diff(full_logits(plain, ids), full) > 1e-3);
        }
      }
}

TEST_CASE("generation: encoders, the head skip and overlong sequences are refused", "[model][generate]") {
  EncoderConfig e;
  e.vocab = 20, e.max_positions = 8, e.hidden = 16, e.layers = 1, e.heads = 2, e.intermediate = 32;
  BertForMaskedLM bert(e, 1);
  CHECK_ERROR(bert.body().decode_cache(1, 4), Catch::Contains("causal decoder"));
  DecodeCache none;
  CHECK_ERROR(bert.body().extend(Tensor::from_vector(std::vector<int32_t>{1}, {1, 1}), none),
              Catch::Contains("encoder"));

  DecoderConfig d = gen_config(kCases[1], PositionKind::learned);
  d.attention.skip_sinky_heads = true;
  GPT2LMHeadModel skip(d, 1);
  CHECK_ERROR(skip.decode_cache(1, 4), Catch::Contains("skip_sinky_heads"));

  DecoderConfig lk = gen_config(kCases[1], PositionKind::learned);
  lk.attention.leaky_bp = true;
  GPT2LMHeadModel leaky(lk, 1);
  CHECK_ERROR(leaky.decode_cache(1, 4), Catch::Contains("leaky_bp"));

  GPT2LMHeadModel m(gen_config(kCases[1], PositionKind::rope), 1);
  CHECK_ERROR(m.decode_cache(1, 41), Catch::Contains("n_positions"));
  DecodeCache c = m.decode_cache(1, 5);
  m.extend(Tensor::from_vector(tokens(4, 48, 1), {1, 4}), c);
  CHECK_ERROR(m.extend(Tensor::from_vector(tokens(2, 48, 2), {1, 2}), c), Catch::Contains("exceed"));
  CHECK_ERROR(m.extend(Tensor::from_vector(std::vector<int32_t>{1, 2}, {2, 1}), c),
              Catch::Contains("cache of 1"));
}

TEST_CASE("generate: greedy tokens are the argmax of the full forward, teacher-forced", "[model][generate]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    GPT2LMHeadModel m(gen_config(c, PositionKind::rope), 7);
    GenerateOptions o;
    o.max_new_tokens = 12;
    o.sampling.greedy = true;
    o.keep_logits = true;
    const std::vector<int32_t> prompt = tokens(5, 48, 9);
    const Generation g = generate(m.body(), m.head(), prompt, o);
    REQUIRE(g.tokens.size() == 12);
    CHECK(g.stop == "max_new_tokens");
    // The whole text but the last token through one forward: row t's argmax is token t + 1.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), g.tokens.begin(), g.tokens.end() - 1);
    const std::vector<double> full = full_logits(m, all);
    REQUIRE(g.logits.size(0) == static_cast<int64_t>(all.size()));
    CHECK(max_abs_diff(values(g.logits), full) < 1e-5);
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      const size_t row = prompt.size() - 1 + i;
      const auto b = full.begin() + static_cast<std::ptrdiff_t>(row * 48);
      CHECK(g.tokens[i] == static_cast<int32_t>(std::max_element(b, b + 48) - b));
    }
    // Without the cache (a full forward per token): the same tokens, the same logits.
    GenerateOptions no_cache = o;
    no_cache.recompute = true;
    const Generation r = generate(m.body(), m.head(), prompt, no_cache);
    CHECK(r.tokens == g.tokens);
    CHECK(max_abs_diff(values(r.logits), values(g.logits)) < 1e-5);
    // Stopping: at the end-of-text id (not kept), at the model's positions.
    o.eos = g.tokens[0];
    const Generation e = generate(m.body(), m.head(), prompt, o);
    CHECK(e.stop == "eos");
    CHECK(e.tokens.empty());
    o.eos = -1;
    o.max_new_tokens = 100;
    const Generation p = generate(m.body(), m.head(), prompt, o);
    CHECK(p.stop == "max_positions");
    CHECK(p.prompt.size() + p.tokens.size() == 41);  // 40 positions fed, the last token drawn from the 40th
    o.recompute = true;
    const Generation pr = generate(m.body(), m.head(), prompt, o);
    CHECK(pr.stop == "max_positions");
    CHECK(pr.tokens == p.tokens);
  }
}

TEST_CASE("generate: sampling is a pure function of the seed, and prompts are checked", "[model][generate]") {
  GPT2LMHeadModel m(gen_config(kCases[2], PositionKind::learned), 3);
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.sampling.temperature = 1.5;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.9;
  const std::vector<int32_t> prompt = tokens(3, 48, 4);
  const Generation a = generate(m.body(), m.head(), prompt, o), b = generate(m.body(), m.head(), prompt, o);
  CHECK(a.tokens == b.tokens);
  o.sampling.seed = 43;
  const Generation c = generate(m.body(), m.head(), prompt, o);
  CHECK(c.tokens != a.tokens);
  o.stream = 1;  // another prompt number draws other numbers
  CHECK(generate(m.body(), m.head(), prompt, o).tokens != c.tokens);
  CHECK_ERROR(generate(m.body(), m.head(), {}, o), Catch::Contains("no tokens"));
  CHECK_ERROR(generate(m.body(), m.head(), {1, 48}, o), Catch::Contains("vocabulary"));
  CHECK_ERROR(generate(m.body(), m.head(), tokens(41, 48, 1), o), Catch::Contains("at most 40"));
  o.sampling.top_p = 0;
  CHECK_ERROR(generate(m.body(), m.head(), prompt, o), Catch::Contains("--top-p"));
}

TEST_CASE("sampling: temperature, top-k and top-p against hand-computed distributions", "[generate]") {
  const std::vector<double> logits{1.0, 2.0, 3.0, 0.0};
  SamplingOptions o;
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1.0;
  auto d = next_token_distribution(logits, o);
  CHECK(d[0] == Approx(std::exp(1.0) / z));
  CHECK(d[2] == Approx(std::exp(3.0) / z));
  CHECK(std::accumulate(d.begin(), d.end(), 0.0) == Approx(1.0));
  // Temperature 2 halves the logits.
  o.temperature = 2;
  d = next_token_distribution(logits, o);
  const double z2 = std::exp(0.5) + std::exp(1.0) + std::exp(1.5) + 1.0;
  CHECK(d[1] == Approx(std::exp(1.0) / z2));
  // Top-k 2 keeps ids 2 and 1.
  o.temperature = 1, o.top_k = 2;
  d = next_token_distribution(logits, o);
  CHECK(d[0] == 0.0);
  CHECK(d[3] == 0.0);
  CHECK(d[2] == Approx(std::exp(3.0) / (std::exp(3.0) + std::exp(2.0))));
  // Top-p: id 2 alone has 0.6439 of the mass; p = 0.6 keeps it alone, p = 0.7 adds id 1.
  o.top_k = 0, o.top_p = 0.6;
  d = next_token_distribution(logits, o);
  CHECK(d[2] == 1.0);
  o.top_p = 0.7;
  d = next_token_distribution(logits, o);
  CHECK(d[2] == Approx(std::exp(3.0) / (std::exp(3.0) + std::exp(2.0))));
  CHECK(d[0] == 0.0);
  // Ties go to the lower id: top-k 1 of {1, 1, 0} keeps id 0; greedy takes id 0.
  o.top_p = 1, o.top_k = 1;
  d = next_token_distribution({1.0, 1.0, 0.0}, o);
  CHECK(d[0] == 1.0);
  SamplingOptions g;
  g.greedy = true;
  CHECK(next_token({1.0, 1.0, 0.0}, g, 0.9) == 0);
  // The draw walks the ids from the most likely: u below p(2) picks 2, above p(2) + p(1) picks 0.
  SamplingOptions s;
  const auto p = next_token_distribution(logits, s);
  CHECK(next_token(logits, s, 0.0) == 2);
  CHECK(next_token(logits, s, p[2] - 1e-9) == 2);
  CHECK(next_token(logits, s, p[2] + 1e-9) == 1);
  CHECK(next_token(logits, s, p[2] + p[1] + 1e-9) == 0);
  CHECK(next_token(logits, s, 0.999999999) == 3);
  // Broken logits are named, not sampled from.
  CHECK_ERROR(next_token({0.0, std::nan("")}, s, 0.5), Catch::Contains("logit of token 1"));
  // Draws are uniform in [0, 1) and differ across streams and indices.
  double lo = 1, hi = 0, sum = 0;
  for (uint64_t i = 0; i < 4000; ++i) {
    const double u = uniform_draw(42, 0, i);
    lo = std::min(lo, u), hi = std::max(hi, u), sum += u;
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(sum / 4000 == Approx(0.5).margin(0.02));
  CHECK(uniform_draw(42, 0, 0) != uniform_draw(42, 1, 0));
}

TEST_CASE("cuda generation: the cache on the GPU follows the full forward and the CPU, and repeats",
          "[cuda][generate]") {
  if (!saobp::cuda::available()) {
    WARN("no GPU: skipped");
    return;
  }
  const std::vector<int32_t> ids = tokens(30, 48, 6);
  for (PositionKind pos : {PositionKind::learned, PositionKind::rope})
    for (const Case& c : kCases) {
      INFO(c.name << ", positions " << positions_name(pos));
      GPT2LMHeadModel cpu(gen_config(c, pos), 42), gpu(gen_config(c, pos), 42, DType::f32, Device::cuda(0));
      const std::vector<double> full_cpu = full_logits(cpu, ids), full_gpu = full_logits(gpu, ids);
      std::vector<int64_t> chunks{5, 1, 1, 1, 3};  // a prompt, tokens, a chunk, tokens to the end
      chunks.resize(30 - 11 + 5, 1);
      const std::vector<double> inc_gpu = incremental_logits(gpu, ids, chunks);
      CHECK(max_abs_diff(inc_gpu, full_gpu) < 1e-5);
      CHECK(max_abs_diff(inc_gpu, full_cpu) < 1e-4);
      GenerateOptions o;
      o.max_new_tokens = 20;
      o.sampling.top_k = 10;
      const Generation a = generate(gpu.body(), gpu.head(), {1, 2, 3}, o),
                       b = generate(gpu.body(), gpu.head(), {1, 2, 3}, o);
      CHECK(a.tokens == b.tokens);
    }
}
