// From a run config to the parts it configures: the models' configs, the schedule, AdamW's
// settings, and the step counts of an epoch-based run.
#include <cmath>
#include <limits>
#include <optional>

#include "core/checked.h"
#include "core/error.h"
#include "model/positions.h"
#include "train/config.h"

namespace saobp {

namespace {
// The [model] keys and train.precision into a family's body config (the family's defaults for
// the rest), validated.
template <class Config>
Config body_config(const RunConfig& cfg) {
  const ModelSection& m = cfg.model;
  Config c;
  c.vocab = m.vocab_size, c.max_positions = m.max_positions, c.hidden = m.hidden, c.layers = m.layers;
  c.heads = m.heads, c.intermediate = m.intermediate, c.dropout = m.dropout;
  c.attention = m.attention;
  c.positions = parse_positions(m.positions);
  c.rope_base = m.rope_base;
  c.gemm_inputs = cfg.train.precision == "bf16" ? GemmInputs::bf16 : GemmInputs::f32;
  c.validate();
  return c;
}
}  // namespace

EncoderConfig encoder_config(const RunConfig& cfg) {
  if (cfg.model.family != "bert")
    fail("config", "model.family is \"{}\": encoder_config builds the bert family only", cfg.model.family);
  return body_config<EncoderConfig>(cfg);
}

DecoderConfig decoder_config(const RunConfig& cfg) {
  if (cfg.model.family != "gpt2")
    fail("config", "model.family is \"{}\": decoder_config builds the gpt2 family only", cfg.model.family);
  return body_config<DecoderConfig>(cfg);
}

RunConfig resolve_epochs(const RunConfig& cfg, int64_t batches_per_epoch) {
  RunConfig r = cfg;
  if (cfg.train.epochs <= 0) return r;
  if (batches_per_epoch <= 0)
    fail("config", "train.epochs = {}: this task has no finite training set; use train.max_steps",
         cfg.train.epochs);
  const int64_t accum = cfg.train.grad_accum;
  const std::optional<int64_t> batches = checked_mul(cfg.train.epochs, batches_per_epoch);
  if (!batches || *batches > std::numeric_limits<int64_t>::max() - accum)
    fail("config", "train.epochs = {} x {} batches per epoch overflows 64 bits", cfg.train.epochs,
         batches_per_epoch);
  r.train.max_steps = (*batches + accum - 1) / accum;
  if (cfg.train.warmup_ratio > 0)
    r.train.warmup_steps =
        static_cast<int64_t>(std::ceil(cfg.train.warmup_ratio * static_cast<double>(r.train.max_steps)));
  if (r.train.warmup_steps >= r.train.max_steps) r.train.warmup_steps = r.train.max_steps - 1;
  validate_schedule(schedule_of(r));
  return r;
}

Schedule schedule_of(const RunConfig& cfg) {
  return {cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps, cfg.train.max_steps};
}

AdamWConfig adamw_config(const RunConfig& cfg) {
  AdamWConfig a;
  a.beta1 = cfg.train.beta1, a.beta2 = cfg.train.beta2, a.eps = cfg.train.eps,
  a.weight_decay = cfg.train.weight_decay;
  return a;
}

}  // namespace saobp
