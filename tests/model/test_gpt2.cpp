// The GPT-2 decoder (Hugging Face GPT2LMHeadModel's layout) and the positions option of BERT.
#include <cmath>

#include "model/bert.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "support.h"

using namespace saobp;
using namespace saobp::test;

namespace {

DecoderConfig tiny_gpt(AttnVariant variant = AttnVariant::original,
                       PositionKind pos = PositionKind::learned) {
  DecoderConfig c;
  c.vocab = 32, c.max_positions = 16, c.hidden = 32, c.layers = 2, c.heads = 2, c.intermediate = 128;
  c.dropout = 0;
  c.attention.variant = variant;
  c.positions = pos;
  return c;
}

// targets[b,t] = ids[b,t+1]; the last position is ignored.
Tensor next_token_targets(const std::vector<int32_t>& ids, int64_t B, int64_t T) {
  std::vector<int32_t> t(ids.size(), -100);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i + 1 < T; ++i)
      t[static_cast<size_t>(b * T + i)] = ids[static_cast<size_t>(b * T + i + 1)];
  return Tensor::from_vector(t, {B, T});
}

double loss_value(const Var& v) { return v.data().item(); }

}  // namespace

TEST_CASE("gpt2: parameter names and shapes are Hugging Face's", "[model]") {
  DecoderConfig c = tiny_gpt();
  c.vocab = 50, c.max_positions = 12, c.hidden = 8, c.intermediate = 20;
  GPT2LMHeadModel m(c, 42);
  std::vector<std::pair<std::string, Shape>> want = {{"transformer.wte.weight", {50, 8}},
                                                     {"transformer.wpe.weight", {12, 8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (auto e : std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {8}},
                                                             {"ln_1.bias", {8}},
                                                             {"attn.c_attn.weight", {8, 24}},
                                                             {"attn.c_attn.bias", {24}},
                                                             {"attn.c_proj.weight", {8, 8}},
                                                             {"attn.c_proj.bias", {8}},
                                                             {"ln_2.weight", {8}},
                                                             {"ln_2.bias", {8}},
                                                             {"mlp.c_fc.weight", {8, 20}},
                                                             {"mlp.c_fc.bias", {20}},
                                                             {"mlp.c_proj.weight", {20, 8}},
                                                             {"mlp.c_proj.bias", {8}}})
      want.push_back({p + e.first, e.second});
  }
  want.push_back({"transformer.ln_f.weight", {8}});
  want.push_back({"transformer.ln_f.bias", {8}});
  const auto& all = m.params().all();
  REQUIRE(all.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(all[i].name() == want[i].first);
    CHECK(all[i].shape() == want[i].second);
  }
  // Initialization: LayerNorm 1/0, biases 0, residual projections at 0.02 / sqrt(2 n_layer).
  CHECK(values(m.params().get("transformer.h.0.ln_1.weight").data()) == std::vector<double>(8, 1.0));
  CHECK(values(m.params().get("transformer.h.1.mlp.c_fc.bias").data()) == std::vector<double>(20, 0.0));

  // RoPE: no wpe; a learnable λ adds saobp_lambda_rho per block.
  c.positions = PositionKind::rope;
  c.attention.variant = AttnVariant::bp_high, c.attention.learnable_lambda = true;
  GPT2LMHeadModel r(c, 42);
  CHECK_THROWS_AS(r.params().get("transformer.wpe.weight"), Error);
  CHECK(r.params().get("transformer.h.1.attn.saobp_lambda_rho").shape() == Shape{2});
  CHECK(r.params().get("transformer.h.1.attn.saobp_lambda_rho").data().to_vector<float>()[0] ==
        Approx(lambda_to_rho(0.2)));
  CHECK(r.params().count() == m.params().count() - 12 * 8 + 2 * 2);
}

TEST_CASE("gpt2: residual projections start at init_std / sqrt(2 n_layer)", "[model]") {
  DecoderConfig c = tiny_gpt();
  c.layers = 8, c.hidden = 64, c.intermediate = 256;
  GPT2LMHeadModel m(c, 42);
  auto rms = [&](const std::string& name) {
    double s = 0;
    const auto v = values(m.params().get(name).data());
    for (double x : v) s += x * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  CHECK(rms("transformer.h.3.attn.c_attn.weight") == Approx(0.02).epsilon(0.05));
  CHECK(rms("transformer.h.3.attn.c_proj.weight") == Approx(0.02 / 4).epsilon(0.05));
  CHECK(rms("transformer.h.3.mlp.c_proj.weight") == Approx(0.02 / 4).epsilon(0.05));
}

TEST_CASE("gpt2: the 124M config has 124,439,808 parameters, BERT-base MLM 109,514,298", "[model]") {
  DecoderConfig c;
  c.vocab = 50257, c.max_positions = 1024, c.hidden = 768, c.layers = 12, c.heads = 12, c.intermediate = 3072;
  int64_t n = 0;
  for (const ParamSpec& s : gpt2_param_specs(c)) n += shape_numel(s.shape);
  CHECK(n == 124439808);
  // The spec list is what the constructor registers (checked on a small model).
  const DecoderConfig t = tiny_gpt();
  int64_t nt = 0;
  for (const ParamSpec& s : gpt2_param_specs(t)) nt += shape_numel(s.shape);
  CHECK(GPT2LMHeadModel(t, 1).params().count() == nt);

  // BERT-base is counted from a built model with 1 layer and a 2-word vocabulary (building all
  // 110M parameters takes seconds): the other 11 layers are copies of layer 0, and each word
  // adds a row of word_embeddings (768) and an entry of cls.predictions.bias (1).
  EncoderConfig b;
  b.vocab = 2, b.hidden = 768, b.layers = 1, b.heads = 12, b.intermediate = 3072, b.max_positions = 512,
  b.type_vocab = 2;
  BertForMaskedLM small(b, 1);
  int64_t layer = 0;
  for (const Var& p : small.params().all())
    if (p.name().rfind("bert.encoder.layer.0.", 0) == 0) layer += p.numel();
  CHECK(layer == 7087872);
  CHECK(small.params().count() + 11 * layer + (30522 - 2) * (768 + 1) == 109514298);
}

TEST_CASE("gpt2: the same seed gives bitwise-identical parameters", "[model]") {
  GPT2LMHeadModel a(tiny_gpt(), 42), b(tiny_gpt(), 42), c(tiny_gpt(), 43);
  const auto &pa = a.params().all(), &pb = b.params().all();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(bitwise_equal(pa[i].data(), pb[i].data()));
  CHECK_FALSE(bitwise_equal(pa[0].data(), c.params().all()[0].data()));
}

TEST_CASE("gpt2: no future leak (token t does not change logits before t)", "[model]") {
  const int64_t T = 10, t0 = 6;
  for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high})
    for (PositionKind pk : {PositionKind::learned, PositionKind::rope}) {
      INFO(variant_name(v) << " " << positions_name(pk));
      GPT2LMHeadModel m(tiny_gpt(v, pk), 42);
      NoGradGuard ng;
      std::vector<int32_t> ids = tokens(2 * T, 32, 3);
      const Tensor a = m.forward(Tensor::from_vector(ids, {2, T}), Tensor(), false, 0).data();
      ids[t0] = (ids[t0] + 7) % 32, ids[T + t0 + 2] = (ids[T + t0 + 2] + 5) % 32;
      const Tensor b = m.forward(Tensor::from_vector(ids, {2, T}), Tensor(), false, 0).data();
      CHECK(bitwise_equal(a.slice(0, 0, 1).slice(1, 0, t0), b.slice(0, 0, 1).slice(1, 0, t0)));
      CHECK(bitwise_equal(a.slice(0, 1, 2).slice(1, 0, t0 + 2), b.slice(0, 1, 2).slice(1, 0, t0 + 2)));
      CHECK_FALSE(bitwise_equal(a.slice(1, t0, T), b.slice(1, t0, T)));  // the future does change
    }
}

TEST_CASE("gpt2: the leaking ablation (model.leaky_bp) does leak: token t changes logits before t",
          "[model]") {
  const int64_t T = 10, t0 = 6;
  for (AttnVariant v : {AttnVariant::bp_high, AttnVariant::bp_low}) {
    INFO(variant_name(v));
    DecoderConfig c = tiny_gpt(v, PositionKind::rope);
    c.init_std = 0.3;  // peaked attention, so the messages carry something
    c.attention.lambda = 1.0;
    c.attention.leaky_bp = true;
    GPT2LMHeadModel m(c, 42);
    NoGradGuard ng;
    std::vector<int32_t> ids = tokens(T, 32, 3);
    const Tensor a = m.forward(Tensor::from_vector(ids, {1, T}), Tensor(), false, 0).data();
    ids[t0] = (ids[t0] + 7) % 32;
    const Tensor b = m.forward(Tensor::from_vector(ids, {1, T}), Tensor(), false, 0).data();
    CHECK(max_abs_diff(values(a.slice(1, 0, t0).contiguous()), values(b.slice(1, 0, t0).contiguous())) >
          1e-4);
  }
}

TEST_CASE("gpt2: right padding leaves the real positions' logits unchanged", "[model]") {
  const int64_t T = 7, P = 10;
  for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high})
    for (PositionKind pk : {PositionKind::learned, PositionKind::rope}) {
      INFO(variant_name(v) << " " << positions_name(pk));
      GPT2LMHeadModel m(tiny_gpt(v, pk), 42);
      NoGradGuard ng;
      std::vector<int32_t> ids = tokens(T, 32, 11);
      const Tensor a = m.forward(Tensor::from_vector(ids, {1, T}), Tensor(), false, 0).data();
      std::vector<int32_t> padded = ids;
      padded.resize(P, 0);
      std::vector<uint8_t> mask(P, 0);
      for (int64_t t = 0; t < T; ++t) mask[static_cast<size_t>(t)] = 1;
      const Tensor b =
          m.forward(Tensor::from_vector(padded, {1, P}), Tensor::from_vector(mask, {1, P}), false, 0).data();
      CHECK(max_abs_diff(values(a), values(b.slice(1, 0, T))) < 1e-5);
    }
}

TEST_CASE("gpt2: a tiny model overfits one batch (original, bp_high)", "[model]") {
  const int64_t B = 4, T = 16;
  const std::vector<int32_t> ids = tokens(B * T, 32, 5);
  const Tensor x = Tensor::from_vector(ids, {B, T}), y = next_token_targets(ids, B, T);
  for (AttnVariant v : {AttnVariant::original, AttnVariant::bp_high}) {
    INFO(variant_name(v));
    GPT2LMHeadModel m(tiny_gpt(v), 42);
    AdamW opt(m.params().all(), AdamWConfig{0.9, 0.999, 1e-8, 0.0});
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      m.params().zero_grad();
      Var loss = m.lm_loss(m.forward(x, Tensor(), true, static_cast<uint64_t>(step)), y);
      loss.backward();
      opt.step(1e-2);
      last = loss_value(loss);
      if (step == 0) first = last;
      if (last < 0.05) break;
    }
    CHECK(first > 3.0);  // ~ log 32 at initialization
    CHECK(last < 0.05);
  }
}

TEST_CASE("gpt2: f64 finite differences of the whole model's loss", "[model][gradcheck]") {
  // Central differences on every element of a few parameter tensors against backward(), with
  // gradcheck's error measure |analytic - numeric| / max(1, |numeric|).
  for (PositionKind pk : {PositionKind::learned, PositionKind::rope}) {
    INFO(positions_name(pk));
    DecoderConfig c = tiny_gpt(AttnVariant::bp_high, pk);
    c.vocab = 11, c.max_positions = 6, c.hidden = 8, c.intermediate = 16, c.init_std = 0.3;
    c.attention.learnable_lambda = true, c.attention.lambda = 0.5;
    GPT2LMHeadModel m(c, 7, DType::f64);
    const int64_t B = 2, T = 5;
    const std::vector<int32_t> ids = tokens(B * T, 11, 9);
    const Tensor x = Tensor::from_vector(ids, {B, T}), y = next_token_targets(ids, B, T);
    const std::vector<uint8_t> km = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    const Tensor mask = Tensor::from_vector(km, {B, T});
    m.params().zero_grad();
    m.lm_loss(m.forward(x, mask, false, 0), y).backward();
    const std::vector<std::string> names = {"transformer.h.0.attn.c_attn.bias",
                                            "transformer.h.1.attn.saobp_lambda_rho",
                                            "transformer.h.1.mlp.c_proj.bias", "transformer.ln_f.weight"};
    NoGradGuard ng;
    const double h = 1e-6;
    double worst = 0, biggest = 0;
    for (const std::string& name : names) {
      Var p = m.params().get(name);
      const std::vector<double> g = values(p.grad());
      std::vector<double> v = values(p.data());
      for (size_t i = 0; i < v.size(); ++i) {
        auto loss_at = [&](double value) {
          std::vector<double> w = v;
          w[i] = value;
          p.data().copy_from(Tensor::from_vector(w, p.shape()));
          return loss_value(m.lm_loss(m.forward(x, mask, false, 0), y));
        };
        const double num = (loss_at(v[i] + h) - loss_at(v[i] - h)) / (2 * h);
        loss_at(v[i]);
        worst = std::max(worst, std::abs(g[i] - num) / std::max(1.0, std::abs(num)));
        biggest = std::max(biggest, std::abs(num));
      }
    }
    CHECK(worst < 1e-6);
    CHECK(biggest > 1e-3);
  }
}

TEST_CASE("positions: names round-trip, unknown names are rejected", "[model]") {
  for (PositionKind p : {PositionKind::learned, PositionKind::rope, PositionKind::none})
    CHECK(parse_positions(positions_name(p)) == p);
  CHECK_ERROR(parse_positions("alibi"), Catch::Contains("alibi") && Catch::Contains("rope"));
}

TEST_CASE("bert: rope positions drop position_embeddings and still train", "[model]") {
  EncoderConfig c;
  c.vocab = 24, c.hidden = 16, c.layers = 2, c.heads = 2, c.intermediate = 32, c.max_positions = 16;
  c.dropout = 0;
  c.positions = PositionKind::rope;
  BertForMaskedLM m(c, 42);
  CHECK_THROWS_AS(m.params().get("bert.embeddings.position_embeddings.weight"), Error);
  c.positions = PositionKind::none;
  CHECK(BertForMaskedLM(c, 42).params().count() == m.params().count());
  c.positions = PositionKind::learned;
  CHECK(BertForMaskedLM(c, 42).params().count() == m.params().count() + 16 * 16);

  const int64_t B = 2, T = 8;
  const std::vector<int32_t> ids = tokens(B * T, 24, 13);
  std::vector<int32_t> labels(ids.size(), -100), input = ids;
  for (size_t i = 1; i < ids.size(); i += 3) labels[i] = ids[i], input[i] = 0;  // 0 = [MASK]
  const Tensor x = Tensor::from_vector(input, {B, T}), y = Tensor::from_vector(labels, {B, T});
  AdamW opt(m.params().all(), AdamWConfig{0.9, 0.999, 1e-8, 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    m.params().zero_grad();
    Var loss = m.mlm_loss(m.encode(x, Tensor(), Tensor(), true, static_cast<uint64_t>(step)), y);
    loss.backward();
    opt.step(1e-2);
    last = loss_value(loss);
    if (step == 0) first = last;
  }
  CHECK(last < 0.5 * first);
}
