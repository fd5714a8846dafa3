// The long-range classification tasks of the connection-bottleneck slides ("Connection
// Bottleneck in Attention", docs/references.md): copying the first or last token, counting, and
// multi-hop pointer chasing. Every example is a
// pure function of (seed, split, length, index) through Philox, so nothing is stored and train
// and test never share a stream. docs/tasks.md has every format with an example.
//
// One symbol vocabulary serves every task (kVocabSize tokens): specials, the digits '0'..'9'
// and the letters 'a'..'p'. A sequence of length L is exactly L real tokens, [CLS] first; a
// batch pads them on the right to its longest with PAD and a key mask (1 = token).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace saobp::tasks {

// The vocabulary. kDigit + d is the digit d, kLetter + i the i-th letter ('a' + i).
enum Token : int32_t {
  kPad = 0,
  kCls = 1,
  kSep = 2,     // the separator ('|'): tally groups in the *_sep tasks, filler in chase
  kQuery = 3,   // '?': the query marker of count_word and chase
  kArrow = 4,   // '>': key > value in chase
  kPlus = 5,    // '+' in count_sum
  kEquals = 6,  // '=' ends count_sum when the length leaves room
  kDigit = 7,   // '0'..'9': 7..16
  kLetter = 17  // 'a'..'p': 17..32
};
constexpr int32_t kDigits = 10, kLetters = 16;
constexpr int32_t kVocabSize = kLetter + kLetters;  // 33
// The longest sequence any task generates; counting tasks have kMaxLength classes (counts
// 0 .. kMaxLength - 1), so their head does not change with the evaluated lengths.
constexpr int64_t kMaxLength = 1024;
// Fixed task constants: the copied digit is one of kCopyAlphabet; the repeated blocks of the
// *_blocks copies are kBlock long; a separator follows every kGroup-th counted item; count_word
// draws from kWords words; chase draws nodes from the kLetters letters; count_random has
// P('1') = kOnesProbability.
constexpr int32_t kCopyAlphabet = 8, kBlock = 8, kGroup = 5, kWords = 8;
constexpr double kOnesProbability = 0.7;

enum class Kind {
  copy_first,
  copy_last,
  copy_first_blocks,
  copy_last_blocks,
  count_sum,
  count_ones,
  count_random,
  count_word,
  chase2,
  chase3
};
enum class Split { train, test };

struct TaskSpec {
  std::string name;
  Kind kind = Kind::copy_first;
  bool sep = false;         // the *_sep counting variant
  int64_t num_classes = 0;  // labels are 0 .. num_classes - 1
  int64_t min_length = 0;   // the shortest valid sequence
};

// The spec of a task name: copy_first, copy_last, copy_first_blocks, copy_last_blocks,
// count_sum, count_ones, count_random, count_word (each also with _sep), chase2, chase3.
// Throws "[tasks] unknown task ..." listing the names.
TaskSpec task_spec(const std::string& name);
std::vector<std::string> task_names();

struct Example {
  std::vector<int32_t> tokens;  // exactly `length` tokens, tokens[0] = kCls
  int32_t label = 0;
};

// Example `index` of `split` at `length` (min_length .. kMaxLength; throws otherwise).
Example generate(const TaskSpec& t, uint64_t seed, Split split, int64_t length, uint64_t index);

// The label of a sequence computed from its tokens alone, by scanning (counts) or following
// the chain of lookups (chase); checks the format and throws "[tasks] ..." on a malformed
// sequence. The tests hold the generators to it.
int32_t solve(const TaskSpec& t, const std::vector<int32_t>& tokens);

// The length of training example `index`: uniform in [min_length, max_length], drawn from its
// own stream, so the per-length evaluation is not all outside the training range.
int64_t train_length(const TaskSpec& t, uint64_t seed, uint64_t index, int64_t max_length);

// The lengths of training examples first .. first + n - 1 (train_length of each).
std::vector<int64_t> train_lengths(const TaskSpec& t, uint64_t seed, uint64_t first, int64_t n,
                                   int64_t max_length);

struct Batch {
  Tensor ids;                    // (B,T) i32, PAD after each sequence's end
  Tensor key_mask;               // (B,T) u8, 1 = token
  std::vector<int32_t> labels;   // (B)
  std::vector<int64_t> lengths;  // (B)
};

// Examples first_index .. first_index + B - 1 of `split`, the b-th of lengths[b], padded to
// T = the longest of them.
Batch make_batch(const TaskSpec& t, uint64_t seed, Split split, const std::vector<int64_t>& lengths,
                 uint64_t first_index);

// ---- The counting tasks answered by a language model (data.answer = "direct" or "chain") ----
//
// A causal decoder reads the example and writes its answer as tokens after it, so it is trained
// on next-token prediction and evaluated by generation. Two more kinds of token follow the task
// vocabulary: kAnswer ('=>', the answer follows) and the counts kCount + n (n = 0 .. kMaxLength -
// 1, rendered '#n'), one token per number as the classification form has one class per count.
constexpr int32_t kAnswer = kVocabSize;                // 33
constexpr int32_t kCount = kAnswer + 1;                // 34 .. 1057
constexpr int32_t kLmVocabSize = kCount + kMaxLength;  // 1058

// The running count of a counting example after each of its counted items, in order: the terms of
// count_sum, the ones of count_ones, the bits of count_random, the words of count_word (counting
// those equal to the query); the separators are not items. The last is solve()'s label (an
// example with no item gives none). Throws for the other tasks and on a malformed sequence.
std::vector<int32_t> running_counts(const TaskSpec& t, const std::vector<int32_t>& tokens);

// The tokens a language model writes after `tokens`: chain = false, the direct answer
// `=> #c`; chain = true, the chain of thought `#r1 #r2 ... #rm => #c` (running_counts, then the
// answer c = rm).
std::vector<int32_t> answer_tokens(const TaskSpec& t, const std::vector<int32_t>& tokens, bool chain);

// A readable rendering ("[CLS] 3 1 1 1", "a>b c>d ? a") for messages and docs.
std::string render(const std::vector<int32_t>& tokens);
// The name of label `label` of task t ("3", "17", "b"), as id2label of the HF config.
std::string label_name(const TaskSpec& t, int32_t label);

}  // namespace saobp::tasks
