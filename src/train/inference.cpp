// The evaluation forward pass and its timing of src/train/inference.h.
#include "train/inference.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/stats.h"
#include "data/synthetic.h"
#include "train/task.h"

namespace saobp {

void predicted_positions(const Tensor& labels, std::vector<int32_t>& pos, std::vector<int32_t>& tgt) {
  const std::vector<int32_t> lab = labels.to_vector<int32_t>();
  pos.clear(), tgt.clear();
  for (size_t k = 0; k < lab.size(); ++k)
    if (lab[k] != -100) pos.push_back(static_cast<int32_t>(k)), tgt.push_back(lab[k]);
}

Var eval_logits(Body& body, LmHead& head, const Tensor& ids, const Tensor& key_mask,
                const Tensor& positions) {
  return head.logits_at(body.hidden(ids, Tensor(), key_mask, false, 0), positions);
}

namespace {

// The held-out batches of one batch size, and the pass that the clock times.
class Pass {
 public:
  Pass(const RunConfig& cfg, int64_t B, Body& body, LmHead& head) : body_(body), head_(head) {
    const int64_t T = cfg.train.seq_len, V = cfg.model.vocab_size;
    if (body.shape().causal)
      clm_ = synthetic_clm_source(B, T, V, cfg.train.seed);
    else
      mlm_ = synthetic_mlm_source(B, T, V, cfg.train.seed, cfg.data.mlm_probability);
  }
  // Batch `index` of the held-out split: its ids, key mask and head rows, outside the clock.
  // Returns the number of head rows.
  double prepare(int64_t index) {
    std::vector<int32_t> tgt;
    if (mlm_) {
      const MlmBatch b = mlm_->batch(Split::valid, index);
      ids_ = b.ids, mask_ = b.key_mask;
      predicted_positions(b.labels, pos_, tgt);
    } else {
      const ClmBatch b = clm_->batch(Split::valid, index);
      ids_ = b.ids, mask_ = b.key_mask;
      predicted_positions(b.targets, pos_, tgt);
    }
    rows_ = pos_.empty() ? Tensor()
                         : Tensor::from_vector(pos_, {static_cast<int64_t>(pos_.size())}, body_.device());
    return static_cast<double>(pos_.size());
  }
  // The timed pass; its outputs are released inside it, as an inference loop would.
  void run() {
    const Var out = pos_.empty() ? body_.hidden(ids_, Tensor(), mask_, false, 0)
                                 : eval_logits(body_, head_, ids_, mask_, rows_);
  }

 private:
  Body& body_;
  LmHead& head_;
  std::unique_ptr<MlmSource> mlm_;
  std::unique_ptr<ClmSource> clm_;
  Tensor ids_, mask_, rows_;
  std::vector<int32_t> pos_;
};

// The median, extremes, mean head rows and forward FLOPs of the timed passes.
void finish(InferenceTiming& t, const RunConfig& cfg, Head head) {
  t.head_rows /= static_cast<double>(t.seconds.size());
  t.median = stats::median(t.seconds);
  t.min = *std::min_element(t.seconds.begin(), t.seconds.end());
  t.max = *std::max_element(t.seconds.begin(), t.seconds.end());
  t.terms = forward_flops(cfg, head, static_cast<double>(t.tokens), t.head_rows, 0);
  t.flops = total_flops(t.terms);
}

}  // namespace

InferenceBench time_inference(const RunConfig& cfg, int warmup, int iters) {
  SAOBP_CHECK(warmup >= 0 && iters >= 1, "inference", "warm-up {} and timed passes {}: need >= 0 and >= 1",
              warmup, iters);
  const std::unique_ptr<Body> body = make_body(cfg);
  const std::unique_ptr<LmHead> head = make_lm_head(*body);
  InferenceBench r;
  r.batch.batch_size = cfg.train.batch_size;
  r.single.batch_size = 1;
  Pass batch(cfg, r.batch.batch_size, *body, *head), single(cfg, 1, *body, *head);
  const std::pair<InferenceTiming*, Pass*> passes[] = {{&r.batch, &batch}, {&r.single, &single}};
  NoGradGuard ng;
  for (int i = 0; i < warmup + iters; ++i)
    for (const auto& [t, pass] : passes) {
      const double rows = pass->prepare(i);
      const auto t0 = std::chrono::steady_clock::now();
      pass->run();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i >= warmup) t->seconds.push_back(dt), t->head_rows += rows;
    }
  for (const auto& [t, pass] : passes) {
    t->tokens = t->batch_size * cfg.train.seq_len;
    finish(*t, cfg, body->shape().causal ? Head::lm : Head::mlm);
  }
  return r;
}

nlohmann::json inference_figures(const InferenceTiming& t) {
  nlohmann::json terms = nlohmann::json::array();
  for (const FlopTerm& f : t.terms)
    terms.push_back({{"name", f.name}, {"formula", f.formula}, {"flops", f.flops}});
  return {{"batch_size", t.batch_size},
          {"tokens", t.tokens},
          {"passes", t.seconds.size()},
          {"ms_median", 1e3 * t.median},
          {"ms_min", 1e3 * t.min},
          {"ms_max", 1e3 * t.max},
          {"tokens_per_s", static_cast<double>(t.tokens) / t.median},
          {"sequences_per_s", static_cast<double>(t.batch_size) / t.median},
          {"head_rows", t.head_rows},
          {"flops", t.flops},
          {"flop_terms", terms},
          {"gflops", t.flops / t.median / 1e9}};
}

nlohmann::json inference_bench_json(const RunConfig& cfg, const InferenceBench& b, int warmup, int threads,
                                    double steal, double others) {
  return {{"tool", "saobp"},
          {"mode", "inference"},
          {"family", cfg.model.family},
          {"preset", cfg.model.preset},
          {"attention", variant_name(cfg.model.attention.variant)},
          {"batch_size", cfg.train.batch_size},
          {"seq_len", cfg.train.seq_len},
          {"threads", threads},
          {"warmup", warmup},
          {"steal_fraction", steal},
          {"others_fraction", others},
          {"batch", inference_figures(b.batch)},
          {"single", inference_figures(b.single)}};
}

void inspect_lm(Body& body, LmHead& head, const Tensor& ids, std::vector<AttentionMaps>& maps,
                std::vector<Tensor>& hidden, Tensor& logits) {
  NoGradGuard ng;
  body.capture_hidden(&hidden);
  const Var h = body.hidden(ids, Tensor(), Tensor(), false, 0, &maps);
  body.capture_hidden(nullptr);
  logits = head.logits(h).data();
}

}  // namespace saobp
