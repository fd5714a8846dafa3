#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/ops.h"
#include "dist/comm.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "tensor/device_info.h"

namespace saobp {

void score_logits(const Var& logits, const std::vector<int32_t>& tgt, double& loss_sum, int64_t& correct,
                  int64_t& n) {
  const int64_t N = static_cast<int64_t>(tgt.size()), V = logits.size(-1);
  if (N == 0) return;
  const Var flat = reshape(logits, {N, V});
  loss_sum += cross_entropy(flat, Tensor::from_vector(tgt, {N}, logits.device())).data().item() *
              static_cast<double>(N);
  const std::vector<float> l = flat.data().to_vector<float>();
  for (int64_t k = 0; k < N; ++k) {
    const float* row = l.data() + k * V;
    correct += std::max_element(row, row + V) - row == tgt[static_cast<size_t>(k)];
  }
  n += N;
}

EvalResult finish_eval(double loss_sum, int64_t correct, int64_t n) {
  EvalResult r;
  r.predictions = n;
  if (n) {
    r.loss = loss_sum / static_cast<double>(n);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
    r.perplexity = std::exp(r.loss);
  }
  return r;
}

void set_label_maps(nlohmann::json& j, const std::vector<std::string>& names) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t k = 0; k < names.size(); ++k) {
    id2label[std::to_string(k)] = names[k];
    label2id[names[k]] = k;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
}

nlohmann::json saobp_config_fields(const ModelSection& m) {
  nlohmann::json j = {{"saobp_attention", variant_name(m.attention.variant)},
                      {"saobp_lambda", m.attention.lambda},
                      {"saobp_layer_lambdas", m.attention.layer_lambdas},
                      {"saobp_learnable_lambda", m.attention.learnable_lambda},
                      {"saobp_bp_steps", m.attention.bp_steps},
                      {"saobp_positions", m.positions}};
  if (m.attention.leaky_bp) j["saobp_leaky_bp"] = true;  // the leaking ablation says so in its folder
  return j;
}

nlohmann::json bert_hf_config(const ModelSection& m, int32_t pad_id) {
  nlohmann::json j = {{"model_type", "bert"},
                      {"vocab_size", m.vocab_size},
                      {"hidden_size", m.hidden},
                      {"num_hidden_layers", m.layers},
                      {"num_attention_heads", m.heads},
                      {"intermediate_size", m.intermediate},
                      {"hidden_act", "gelu"},
                      {"hidden_dropout_prob", m.dropout},
                      {"attention_probs_dropout_prob", 0.0},
                      {"max_position_embeddings", m.max_positions},
                      {"type_vocab_size", 2},
                      {"initializer_range", 0.02},
                      {"layer_norm_eps", 1e-12},
                      {"pad_token_id", pad_id},
                      {"position_embedding_type", "absolute"},
                      {"torch_dtype", "float32"}};
  j.update(saobp_config_fields(m));
  return j;
}

nlohmann::json gpt2_hf_config(const ModelSection& m, int32_t bos_eos_id) {
  nlohmann::json j = {{"model_type", "gpt2"},
                      {"vocab_size", m.vocab_size},
                      {"n_positions", m.max_positions},
                      {"n_embd", m.hidden},
                      {"n_layer", m.layers},
                      {"n_head", m.heads},
                      {"n_inner", m.intermediate},
                      {"activation_function", "gelu_new"},
                      {"resid_pdrop", m.dropout},
                      {"embd_pdrop", m.dropout},
                      {"attn_pdrop", 0.0},
                      {"layer_norm_epsilon", 1e-5},
                      {"initializer_range", 0.02},
                      {"tie_word_embeddings", true},
                      {"bos_token_id", bos_eos_id},
                      {"eos_token_id", bos_eos_id},
                      {"torch_dtype", "float32"}};
  j.update(saobp_config_fields(m));
  return j;
}

nlohmann::json sequence_hf_config(const ModelSection& m, const char* bert_architecture, int32_t bos_eos_id,
                                  int32_t pad_id, const HeadLabels& labels, const std::string& task,
                                  const char* gpt2_architecture) {
  nlohmann::json j;
  if (m.family == "bert") {
    j = bert_hf_config(m, pad_id);
    j["architectures"] = nlohmann::json::array({bert_architecture});
    j["classifier_dropout"] = nullptr;
  } else {
    j = gpt2_hf_config(m, bos_eos_id);
    j["architectures"] = nlohmann::json::array({gpt2_architecture});
    j["pad_token_id"] = pad_id;
  }
  if (!labels.names.empty()) {
    set_label_maps(j, labels.names);
    j["problem_type"] = labels.problem_type;
  }
  j["saobp_task"] = task;
  return j;
}

Device run_device(const RunConfig& cfg) {
  const std::string& name = cfg.train.device;
  Device d = Device::parse(name);
  if (d.is_cpu()) return d;
  if (!cuda::built())
    fail("train", "train.device '{}': this build has no CUDA backend (reconfigure with -DSAOBP_CUDA=ON)",
         name);
  const int n = cuda::device_count();
  if (n == 0)
    fail("train",
         "train.device '{}': no GPU found (the CUDA backend is built, but the CUDA runtime sees no device)",
         name);
  if (d.index < 0 || d.index >= n)
    fail("train", "train.device '{}': this machine has {} GPU{} (cuda:0{})", name, n, n == 1 ? "" : "s",
         n == 1 ? "" : fmt::format(" to cuda:{}", n - 1));
  // "cuda" without an index: under mpirun each rank takes the GPU of its rank on the host, modulo
  // the GPUs there (ranks share one when there are more ranks than GPUs); "cuda:N" is N for all.
  if (name == "cuda" || name == "gpu") d = Device::cuda(dist::local_rank() % n);
  // train.memory_limit_gib: the caching allocator holds no more than that from the driver.
  if (cfg.train.memory_limit_gib > 0)
    cuda::set_memory_limit(d.index,
                           static_cast<size_t>(cfg.train.memory_limit_gib * 1024.0 * 1024.0 * 1024.0));
  return d;
}

std::unique_ptr<Body> make_body(const RunConfig& cfg) {
  const Device device = run_device(cfg);
  if (cfg.model.family == "bert")
    return std::make_unique<BertEncoder>(encoder_config(cfg), cfg.train.seed, DType::f32, device);
  if (cfg.model.family == "gpt2")
    return std::make_unique<Gpt2Decoder>(decoder_config(cfg), cfg.train.seed, DType::f32, device);
  fail("train", "model.family '{}' is not bert or gpt2", cfg.model.family);
}

namespace {
std::map<std::string, TaskMaker>& task_makers() {
  static std::map<std::string, TaskMaker> makers;
  return makers;
}
}  // namespace

void register_task_kind(const std::string& kind, TaskMaker make) { task_makers()[kind] = make; }

std::unique_ptr<Task> make_task(const RunConfig& cfg) {
  run_device(cfg);  // a device this build and machine cannot give is refused before any data is read
  const std::string& kind = cfg.data.kind;
  if (const auto it = task_makers().find(kind); it != task_makers().end()) return it->second(cfg);
  if (kind == "task") return cfg.data.answer == "class" ? make_cls_task(cfg) : make_answer_task(cfg);
  if (kind == "benchmark")
    fail("train", "data.kind 'benchmark': this program registered no task for it (finetune::register_tasks)");
  if (cfg.model.family == "bert") return make_mlm_task(cfg);
  if (cfg.model.family == "gpt2") return make_clm_task(cfg);
  fail("train", "model.family '{}' is not bert or gpt2", cfg.model.family);
}

}  // namespace saobp
