// Text generation with a causal decoder (`saobp generate`). The prompt goes through the model once
// as one chunk, then each new token alone: Body::extend reads every earlier position from the
// decoder's cache (keys, values and, for SAOBP, the running column sums of the Potts messages:
// attention/incremental.h), so a token costs O(T) per head and layer. The next token is the
// argmax of the last position's logits or a draw from them after temperature, top-k and top-p
// (the order of Hugging Face's logits warpers), from Philox at (seed, prompt, token): the same
// seed gives the same text on a machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/body.h"
#include "model/heads.h"

namespace saobp {

struct SamplingOptions {
  bool greedy = false;       // the argmax (the lowest id among equal maxima); the rest is not read
  double temperature = 1.0;  // > 0: logits / temperature
  int64_t top_k = 0;         // >= 0: keep the k most likely tokens (0 keeps all)
  double top_p = 1.0;        // in (0, 1]: then keep the fewest most likely tokens whose mass reaches p
  uint64_t seed = 42;
  // Throws naming the option (--temperature, --top-k, --top-p) of a value out of range.
  void validate() const;
};

// The distribution a sampled token is drawn from, over the V ids: softmax(logits / temperature)
// over the top_k most likely ids, then over the nucleus of top_p, renormalized; 0 elsewhere. The
// order of likelihood breaks ties by the lower id. Throws when a logit is not finite.
std::vector<double> next_token_distribution(const std::vector<double>& logits, const SamplingOptions& o);
// The next token: the argmax when greedy; else the id at which the cumulative probability, summed
// in order of decreasing probability (ties: lower id first), first exceeds u · total, u in [0, 1).
int32_t next_token(const std::vector<double>& logits, const SamplingOptions& o, double u);
// Uniform in [0, 1) with 53 random bits: draw `index` of Philox stream (seed, stream).
double uniform_draw(uint64_t seed, uint64_t stream, uint64_t index);

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  int32_t eos = -1;          // generation stops when it draws this id (not kept); -1: never
  uint64_t stream = 0;       // the Philox stream of the draws (the prompt's number)
  bool keep_logits = false;  // keep the logits of every position that went through the model
  // The baseline without a cache: every token runs the full forward over the whole sequence so far
  // (O(T²) per head for a token instead of O(T)); the same tokens, for timing the cache against.
  bool recompute = false;
};

struct Generation {
  std::vector<int32_t> prompt, tokens;  // tokens: the generated ids, the EOS left out
  std::string stop;                     // "eos", "max_new_tokens" or "max_positions"
  double prefill_seconds = 0;           // the prompt's pass and its logits on the host
  double decode_seconds = 0;            // the tokens after the first
  // keep_logits: (N, V) f64 on the host, row t the logits at position t, for the N = prompt +
  // fed tokens (every generated token but the last goes through the model).
  Tensor logits;
};

// Generates after `prompt` (>= 1 ids) with a causal body and its LM head, one sequence. The
// model's max_positions bounds prompt + generated tokens. Eval mode, no gradient.
Generation generate(Body& body, LmHead& head, const std::vector<int32_t>& prompt, const GenerateOptions& o);

}  // namespace saobp
