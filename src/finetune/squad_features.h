// SQuAD span extraction: examples -> model inputs with a document stride, and the model's start
// and end logits -> answer texts in the context's characters (the method of the original BERT
// run_squad.py, which Hugging Face's run_qa.py keeps), for an encoder (BERT) and a decoder
// (GPT-2, FeatureOptions::decoder):
//   - the context is split on whitespace into words; each word is tokenized on its own (BERT's
//     pre-tokenizer splits on whitespace first, so the pieces are those of the whole text), so
//     every token knows its word and every word its character span;
//   - encoder: a feature is [CLS] question [SEP] chunk [SEP] (types 0 for [CLS] question [SEP], 1
//     after), the question cut to max_query_length tokens, the context cut into chunks of at most
//     max_length - len(question) - 3 tokens that start doc_stride tokens apart;
//   - decoder: a feature is question <|endoftext|> chunk <|endoftext|> (types all 0), chunks of
//     at most max_length - len(question) - 2 tokens. GPT-2 has no separator of its own;
//     <|endoftext|> is its one special token, the boundary between documents in its pretraining
//     text. Attention is causal, so a token's logits see only the tokens before it: the question
//     comes first, so that every context token is read knowing the question. Each context word
//     is tokenized with a space before it (Hugging Face's GPT-2 tokenizer with
//     add_prefix_space=True on words already split), so a word's pieces do not depend on its
//     place in the chunk; the question is tokenized as it stands;
//   - a training answer maps to the first token of its first word and the last token of its
//     last word, narrowed to the tokens of the tokenized answer text when they appear inside
//     (_improve_answer_span; decoder: the answer text with a space before it, else as it stands);
//     an answer outside the chunk, or an impossible question (v2.0), points at the feature's
//     null position (Feature::null_index): [CLS] (position 0) for the encoder; for the decoder the
//     final <|endoftext|>, the one position whose state has read the whole question and chunk
//     (the token GPT2ForSequenceClassification pools for the same reason; position 0 of a causal
//     model has seen only itself and could not tell an answerable chunk from another);
//   - prediction: per feature, the n_best highest start and end logits, pairs inside the chunk's
//     context with start <= end, length <= max_answer_length and the start token in its
//     max-context chunk; the best pair over an example's features wins; its text is the
//     context from the start word's first character to the end word's last, trimmed to the
//     predicted pieces when they are found in it (get_final_text). v2.0: the null answer ""
//     wins when min over features of (start[null] + end[null]) exceeds the best pair's score by
//     more than null_threshold.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "data/benchmarks/benchmarks.h"
#include "tokenizer/tokenizer.h"

namespace saobp::squad {

struct FeatureOptions {
  int64_t max_length = 384;  // tokens per feature, specials included
  int64_t doc_stride = 128;  // tokens between the starts of consecutive chunks
  int64_t max_query_length = 64;
  bool training = false;  // fill start/end positions
  bool decoder = false;   // GPT-2's layout (question <|endoftext|> chunk <|endoftext|>), see above
};

struct Feature {
  int64_t example = 0;               // index into the examples
  std::vector<int32_t> ids, types;   // (L) each, L <= max_length
  int32_t start = 0, end = 0;        // training targets (both null_index: no answer in this chunk)
  int32_t null_index = 0;            // the null answer's position: 0 ([CLS]) or the last token
  int64_t context_offset = 0;        // index of the chunk's first context token in ids
  std::vector<int32_t> token_word;   // per token of ids: its context word, -1 outside the context
  std::vector<uint8_t> max_context;  // per token of ids: 1 when this chunk is its max-context chunk
};

struct Features {
  std::vector<Feature> features;
  // Per example: the character span [begin, end) of each context word, in bytes of the UTF-8
  // context (for building answer texts).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> word_spans;
  int64_t truncated_questions = 0;  // questions longer than max_query_length
  int64_t split_contexts = 0;       // examples whose context needed more than one chunk
  int64_t unanswerable_chunks = 0;  // training features whose answer lies outside the chunk
  // Training examples given no feature because their answer text is not found in the context
  // words at char_start (run_squad.py's "Could not find answer"), or char_start is outside.
  int64_t skipped_examples = 0;
};

// Needs the tokenizer's [CLS] and [SEP], or its <|endoftext|> for the decoder (throws
// "[squad] ..." naming what is missing).
Features make_features(const std::vector<bench::SquadExample>& examples, const Tokenizer& tok,
                       const FeatureOptions& opt);

struct PredictOptions {
  int64_t n_best = 20;
  int64_t max_answer_length = 30;
  bool version_2 = false;  // allow the null answer
  double null_threshold = 0.0;
};

// get_final_text, simplified: `pred` (the predicted pieces' text) and `orig` (the context's
// text of the predicted words) are both normalized per code point (NFD, nonspacing marks
// dropped, lowercased, whitespace and Cc/Cf/Co dropped); the first occurrence of pred's form in
// orig's form maps back to the code points of `orig` it came from. Returns `orig` whole when
// pred's form is empty or not found.
std::string final_text(std::string_view pred, std::string_view orig);

// start_logits[f], end_logits[f]: the logits of feature f over its ids (same length).
// Returns example id -> predicted answer text ("" = no answer, v2.0 only). null_odds, when given
// (v2.0), receives example id -> the least null score of its features minus its best span's score
// (run_squad.py's null_odds.json, which evaluate-v2.0.py --na-prob-file reads); with no span
// candidate, the null score alone.
std::map<std::string, std::string> predict(const std::vector<bench::SquadExample>& examples,
                                           const Features& feats,
                                           const std::vector<std::vector<float>>& start_logits,
                                           const std::vector<std::vector<float>>& end_logits,
                                           const Tokenizer& tok, const PredictOptions& opt,
                                           std::map<std::string, double>* null_odds = nullptr);

}  // namespace saobp::squad
