// What the training loop needs of an objective (masked LM, causal LM, a long-range
// classification task): its parameters, the loss of training batch n, a held-out evaluation,
// and the Hugging Face config.json of its model. The loop (trainer.cpp) knows nothing else.
//
// Batches are pure functions of (config, batch index), so a run resumes from the saved index.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "autograd/var.h"
#include "data/lm_source.h"
#include "model/body.h"
#include "model/heads.h"
#include "tokenizer/tokenizer.h"
#include "train/config.h"
#include "train/regularizer.h"

namespace saobp {

struct EvalResult {
  double loss = 0, accuracy = 0, perplexity = 0;
  int64_t predictions = 0;
  // A benchmark task's official metrics, per evaluated split ({"dev": {"accuracy": ...}});
  // null for the pretraining objectives.
  nlohmann::json metrics;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual ParamStore& params() = 0;
  // Loss of batch `index` of the training stream, with dropout keys of `dropout_step`; fills
  // maps (every layer's A and B) and mask (the batch's key mask) when maps is not null.
  virtual Var train_loss(int64_t index, uint64_t dropout_step, std::vector<AttentionMaps>* maps,
                         Tensor* mask) = 0;
  // Loss, accuracy and perplexity over train.eval_batches batches of the held-out stream.
  virtual EvalResult evaluate() = 0;
  // A fixed held-out batch through the model in eval mode, for diagnostics: fills every
  // layer's maps and the key mask.
  virtual void probe(std::vector<AttentionMaps>& maps, Tensor& mask) = 0;
  // Batch `index` of a split through the model in eval mode (`saobp analyze`): every layer's
  // maps (with values) and the key mask.
  virtual void attention_maps(Split split, int64_t index, std::vector<AttentionMaps>& maps, Tensor& mask) {
    (void)split, (void)index, (void)maps, (void)mask;
    fail("analyze", "this task does not provide attention maps of its batches");
  }
  // One sequence ids (1,T) through the model in eval mode (`saobp inspect`): every layer's maps,
  // the hidden states (embeddings, then each layer) and the output logits.
  virtual void inspect(const Tensor& ids, std::vector<AttentionMaps>& maps, std::vector<Tensor>& hidden,
                       Tensor& logits) {
    (void)ids, (void)maps, (void)hidden, (void)logits;
    fail("inspect", "this task does not support inspection");
  }
  // The inputs of batch `index` of a split: ids (B,T) i32 and key mask (B,T) u8.
  virtual void batch_inputs(Split split, int64_t index, Tensor& ids, Tensor& mask) {
    (void)split, (void)index, (void)ids, (void)mask;
    fail("inspect", "this task does not expose its batches");
  }
  // Batch size of attention_maps.
  virtual int64_t batch_size() const { return 0; }
  // Sequences of the held-out split before its batches repeat (`analyze --samples` and
  // `inspect --sample` stay below it); 0: generated data without end, or not known.
  virtual int64_t held_out_examples() const { return 0; }
  // Evaluation beyond evaluate() that a task defines (the long-range tasks: accuracy per
  // sequence length), printed and written under out_dir; null when the task has none.
  virtual nlohmann::json final_evaluation(const std::string& out_dir, bool print) {
    (void)out_dir, (void)print;
    return nullptr;
  }
  virtual nlohmann::json hf_config() const = 0;
  // Prepares what training batches need (a corpus's token cache) before the first step, so the
  // first timed step does not pay for it. Evaluation never calls it.
  virtual void prepare_training() {}
  // Batches in one pass over a finite training set (train.epochs); 0: an endless stream.
  virtual int64_t train_batches_per_epoch() const { return 0; }
  // Name prefixes of the tensors a pretrained body lacks (a task head): --init initializes
  // them instead of requiring them (train/pretrained.h).
  virtual std::vector<std::string> head_prefixes() const { return {}; }
  // The tokenizer of a corpus run (saved into checkpoints); null for generated data.
  virtual const Tokenizer* tokenizer() const { return nullptr; }
  // The model's body (`saobp analyze --data TASK:DIR` runs benchmark rows through it); null when
  // a task has none.
  virtual Body* body() { return nullptr; }
  // The body and language-model head of a pretraining task (`saobp generate` runs a causal one);
  // null for the others (a task head is not a language model).
  virtual Body* lm_body() { return nullptr; }
  virtual LmHead* lm_head() { return nullptr; }
  // train.regularizer (off unless set): the penalty of the last train_loss is logged.
  const Regularizer& regularizer() const { return reg_; }

 protected:
  // train.regularizer over `body` once the task's head is registered: its parameters come
  // after the head's, and the body fills reg_.qk() in training forwards. train_loss returns
  // reg_.add(loss, key_mask).
  void attach_regularizer(const RunConfig& cfg, Body& body) {
    reg_ = Regularizer(cfg, body.params());
    body.capture_qk(reg_.qk());
  }
  Regularizer reg_;
};

// The task of cfg: bert + corpus/synthetic -> masked LM, gpt2 -> causal LM, data.kind "task"
// -> the long-range classification task, another data.kind -> the task registered for it
// (register_task_kind). Builds the model (seeded by train.seed) and the tokenizer; a corpus is
// read when batches are first asked for (prepare_training: the token cache under
// train.run_dir).
std::unique_ptr<Task> make_task(const RunConfig& cfg);

// The maker of the tasks of a data.kind that a folder above train/ implements ("benchmark":
// src/finetune/, registered by finetune::register_tasks). The program registers them at start,
// before any make_task; registering a kind again replaces its maker.
using TaskMaker = std::unique_ptr<Task> (*)(const RunConfig& cfg);
void register_task_kind(const std::string& kind, TaskMaker make);

std::unique_ptr<Task> make_mlm_task(const RunConfig& cfg);
std::unique_ptr<Task> make_clm_task(const RunConfig& cfg);
// data.kind "task": data.task (data/tasks.h) with a sequence-classification head (cls_task.cpp).
std::unique_ptr<Task> make_cls_task(const RunConfig& cfg);
// data.kind "task" with data.answer "direct" or "chain": a counting task answered by a decoder's
// language-model head, evaluated by generation (answer_task.cpp).
std::unique_ptr<Task> make_answer_task(const RunConfig& cfg);

// The body of model.family (bert: the encoder, gpt2: the decoder), seeded by train.seed; the
// task adds its head.
std::unique_ptr<Body> make_body(const RunConfig& cfg);
// train.device as a Device this build and machine can run on: "cpu", or "cuda" / "cuda:N" with a
// CUDA build that sees that GPU; anything else is refused naming the key and what is missing.
// Under mpirun "cuda" is GPU local_rank mod device_count (dist::local_rank), "cuda:N" is N.
// make_body builds the model there; a batch made on the host crosses at the model's entry.
Device run_device(const RunConfig& cfg);

// Shared by the tasks: accumulates the cross-entropy and argmax accuracy of (N,V) logits
// against N targets; finish turns the sums into an EvalResult.
void score_logits(const Var& logits, const std::vector<int32_t>& targets, double& loss_sum, int64_t& correct,
                  int64_t& n);
EvalResult finish_eval(double loss_sum, int64_t correct, int64_t n);

// config.json's id2label ({"0": name, ...}) and label2id of class names in id order, as
// Hugging Face's *ForSequenceClassification configs hold them.
void set_label_maps(nlohmann::json& j, const std::vector<std::string>& names);

// The saobp fields of config.json (attention variant, λ, positions), shared by the families.
nlohmann::json saobp_config_fields(const ModelSection& m);
// The Hugging Face config.json of a BERT / GPT-2 body (architecture-independent fields plus
// ours); the tasks add "architectures" and their head's fields.
nlohmann::json bert_hf_config(const ModelSection& m, int32_t pad_id);
nlohmann::json gpt2_hf_config(const ModelSection& m, int32_t bos_eos_id);
// The config.json of a task head (model/heads.h) over m's body: bert: bert_hf_config(pad_id)
// with architectures [bert_architecture] and classifier_dropout null; gpt2:
// gpt2_hf_config(bos_eos_id) with architectures [gpt2_architecture] and pad_token_id; then, unless
// `labels` is empty, the label maps and problem_type, and saobp_task = task.
struct HeadLabels {
  std::vector<std::string> names;  // in id order; none for a span or multiple-choice head
  const char* problem_type = "single_label_classification";
};
nlohmann::json sequence_hf_config(const ModelSection& m, const char* bert_architecture, int32_t bos_eos_id,
                                  int32_t pad_id, const HeadLabels& labels, const std::string& task,
                                  const char* gpt2_architecture = "GPT2ForSequenceClassification");

}  // namespace saobp
