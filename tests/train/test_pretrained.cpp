// Pretrained folders (train/pretrained.h): Hugging Face's published layouts built here from
// tiny saobp models (BertModel names without "bert." and with legacy gamma/beta, BertForMaskedLM,
// GPT2LMHeadModel, the original gpt2 layout with attn.bias buffers), our own checkpoints, the
// config.json mapping and its refusals, and half-precision tensors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model/bert.h"
#include "model/gpt2.h"
#include "model/safetensors.h"
#include "support.h"
#include "train/checkpoint.h"
#include "train/pretrained.h"
#include "train/task.h"

using namespace saobp;
using Catch::Contains;
using saobp::test::bitwise_equal;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TmpDir {
  fs::path dir;
  explicit TmpDir(const std::string& tag) {
    dir = fs::temp_directory_path() / ("saobp_pretrained_" + std::to_string(::getpid()) + "_" + tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string str() const { return dir.string(); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  REQUIRE(f.good());
}

Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype(), t.device());
  c.copy_from(t);
  return c;
}

// A tiny BERT: 2 layers, hidden 16, vocab 40, 24 positions.
EncoderConfig tiny_bert() {
  EncoderConfig e;
  e.vocab = 40, e.hidden = 16, e.layers = 2, e.heads = 2, e.intermediate = 32, e.max_positions = 24;
  return e;
}

// bert-base-uncased's config.json key set, with the tiny model's sizes.
json bert_base_style_config() {
  return json::parse(R"({
    "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 32,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 24, "model_type": "bert",
    "num_attention_heads": 2, "num_hidden_layers": 2, "pad_token_id": 0, "type_vocab_size": 2,
    "vocab_size": 40})");
}

// BertModel's published names: no "bert." prefix, LayerNorm weight/bias as gamma/beta.
std::string bertmodel_name(std::string n) {
  if (n.rfind("bert.", 0) == 0) n = n.substr(5);
  if (n.find("LayerNorm.") != std::string::npos) {
    if (n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0) n = n.substr(0, n.size() - 7) + ".gamma";
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0) n = n.substr(0, n.size() - 5) + ".beta";
  }
  return n;
}

// Writes DIR as a Hugging Face BertModel folder holding `src`'s tensors (renamed), config.json
// with only Hugging Face's keys, and vocab.txt. `edit` may change the tensor list first.
void write_bertmodel_folder(const std::string& dir, const ParamStore& src,
                            const std::function<void(std::vector<NamedTensor>&)>& edit = {}) {
  std::vector<NamedTensor> ts;
  for (const Var& p : src.all()) ts.push_back({bertmodel_name(p.name()), p.data()});
  if (edit) edit(ts);
  save_safetensors(dir + "/model.safetensors", ts, {{"format", "pt"}});
  write_text(dir + "/config.json", bert_base_style_config().dump(2));
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < 40; ++i) vocab += fmt::format("w{}\n", i);
  write_text(dir + "/vocab.txt", vocab);
}

// BertForSequenceClassification's head on top of a model's parameters.
void add_classifier(ParamStore& P, int64_t C) {
  P.add("bert.pooler.dense.weight", {C, C}, Init::normal);
  P.add("bert.pooler.dense.bias", {C}, Init::zeros);
  P.add("classifier.weight", {2, C}, Init::normal);
  P.add("classifier.bias", {2}, Init::zeros);
}

const std::vector<std::string> kClassifierHead = {"bert.pooler.", "classifier."};

RunConfig with_model(const ModelSection& m) {
  RunConfig rc;
  rc.model = m;
  return rc;
}

std::vector<std::string> names_of(const ParamStore& P) {
  std::vector<std::string> out;
  for (const Var& p : P.all()) out.push_back(p.name());
  return out;
}

// Raw safetensors: header from (name, dtype, shape, bytes) in order.
struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};
void write_raw_safetensors(const std::string& path, const std::vector<RawTensor>& ts) {
  json h = json::object();
  std::string data;
  for (const RawTensor& t : ts) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  write_text(path, out + text + data);
}
template <class T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

TEST_CASE("pretrained: a Hugging Face BertModel folder initializes a sequence classifier", "[finetune]") {
  TmpDir tmp("bertmodel");
  BertEncoder src(tiny_bert(), 1);
  write_bertmodel_folder(tmp.str(), src.params());

  const PretrainedInfo info = read_pretrained(tmp.str());
  CHECK(info.format == "hf");
  CHECK(info.architecture == "BertModel");
  CHECK(info.has_tokenizer);
  CHECK(info.hf_config == bert_base_style_config());
  ModelSection want;
  want.family = "bert", want.preset = "custom", want.vocab_size = 40, want.hidden = 16, want.layers = 2;
  want.heads = 2, want.intermediate = 32, want.max_positions = 24, want.dropout = 0.1;
  CHECK(info.model == want);

  EncoderConfig ec = encoder_config(with_model(info.model));
  BertEncoder dst(ec, 2);
  add_classifier(dst.params(), 16);
  std::vector<Tensor> heads;
  for (const char* h :
       {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"})
    heads.push_back(clone(dst.params().get(h).data()));

  const InitReport r = init_from_pretrained(tmp.str(), dst.params(), kClassifierHead);
  for (const Var& p : src.params().all()) {
    INFO(p.name());
    CHECK(bitwise_equal(dst.params().get(p.name()).data(), p.data()));
  }
  size_t k = 0;
  for (const char* h :
       {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"})
    CHECK(bitwise_equal(dst.params().get(h).data(), heads[k++]));  // the fresh initialization

  CHECK(r.source == tmp / "model.safetensors");
  CHECK(r.loaded == names_of(src.params()));
  CHECK(r.loaded.size() == 37);  // 5 embedding tensors + 16 per layer
  CHECK(r.initialized == std::vector<std::string>{"bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                                  "classifier.weight", "classifier.bias"});
  CHECK(r.unused.empty());
  CHECK(r.renamed.size() == 37);
  CHECK(r.renamed.at("bert.embeddings.LayerNorm.weight") == "embeddings.LayerNorm.gamma");
  CHECK(r.renamed.at("bert.encoder.layer.1.output.LayerNorm.bias") ==
        "encoder.layer.1.output.LayerNorm.beta");
  CHECK(r.renamed.at("bert.encoder.layer.0.attention.self.query.weight") ==
        "encoder.layer.0.attention.self.query.weight");

  const json j = r.to_json();
  CHECK(j.size() == 5);
  CHECK(j["source"] == r.source);
  CHECK(j["loaded"].size() == 37);
  CHECK(j["initialized"][2] == "classifier.weight");
  CHECK(j["unused"].is_array());
  CHECK(j["unused"].empty());
  CHECK(j["renamed"]["bert.embeddings.LayerNorm.bias"] == "embeddings.LayerNorm.beta");
  const std::string s = r.summary();
  CHECK_THAT(s, Contains("37 tensors loaded (37 renamed), 4 initialized, 0 unused"));
  CHECK_THAT(s, Contains("initialized: bert.pooler.dense.weight, bert.pooler.dense.bias, classifier.weight"));

  SECTION("a learnable λ is not in Hugging Face folders: it keeps its initialization") {
    ModelSection m = info.model;
    m.attention.variant = AttnVariant::bp_high, m.attention.learnable_lambda = true, m.attention.lambda = 0.3;
    EncoderConfig bc = encoder_config(with_model(m));
    BertEncoder bp(bc, 3);
    const std::string rho = "bert.encoder.layer.1.attention.self.saobp_lambda_rho";
    const Tensor before = clone(bp.params().get(rho).data());
    const InitReport rb = init_from_pretrained(tmp.str(), bp.params(), {});
    CHECK(rb.initialized ==
          std::vector<std::string>{"bert.encoder.layer.0.attention.self.saobp_lambda_rho", rho});
    CHECK(rb.loaded.size() == 37);
    CHECK(bitwise_equal(bp.params().get(rho).data(), before));
    CHECK(bp.params().get(rho).data().to_vector<float>()[0] == static_cast<float>(lambda_to_rho(0.3)));
  }
}

TEST_CASE("pretrained: our BertForMaskedLM checkpoint into a classifier leaves cls.* unused", "[finetune]") {
  TmpDir tmp("ours");
  const RunConfig rc =
      load_config("", {"model.preset=custom", "model.vocab_size=40", "model.hidden=16", "model.layers=2",
                       "model.heads=2", "model.intermediate=32", "model.max_positions=24",
                       "model.attention=bp_high", "model.learnable_lambda=true", "train.seq_len=16"});
  BertForMaskedLM src(encoder_config(rc), 4);
  const std::string ckpt = tmp / "final";
  save_checkpoint(
      ckpt, {&src.params(), nullptr, TrainerState{}, bert_hf_config(rc.model, 0), to_toml(rc), nullptr});

  const PretrainedInfo info = read_pretrained(ckpt);
  CHECK(info.format == "saobp");
  CHECK(info.model == rc.model);
  CHECK(info.architecture.empty());
  CHECK(info.hf_config["saobp_attention"] == "bp_high");
  CHECK_FALSE(info.has_tokenizer);

  EncoderConfig ec = encoder_config(with_model(info.model));
  BertEncoder dst(ec, 5);
  add_classifier(dst.params(), 16);
  const InitReport r = init_from_pretrained(ckpt, dst.params(), kClassifierHead);
  CHECK(r.loaded.size() == 39);  // 37 + the two learnable λ
  CHECK(r.renamed.empty());
  CHECK(r.initialized.size() == 4);
  CHECK(r.unused == std::vector<std::string>{
                        "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                        "cls.predictions.transform.LayerNorm.weight",
                        "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias"});
  for (const std::string& n : r.loaded) {
    INFO(n);
    CHECK(bitwise_equal(dst.params().get(n).data(), src.params().get(n).data()));
  }
  CHECK_THAT(r.summary(), Contains("unused: cls.predictions.transform.dense.weight"));
  CHECK_THAT(r.summary(), Contains("0 renamed"));
}

TEST_CASE("pretrained: a checkpoint of ours without config.toml reads as a Hugging Face folder",
          "[finetune]") {
  // Its config.json carries saobp's own keys, the tokenizer's fingerprint among them: none is
  // refused as unknown.
  TmpDir tmp("ours_as_hf");
  const RunConfig rc = load_config(
      "", {"model.preset=custom", "model.vocab_size=40", "model.hidden=16", "model.layers=2", "model.heads=2",
           "model.intermediate=32", "model.max_positions=24", "model.attention=bp_high", "train.seq_len=16"});
  BertForMaskedLM src(encoder_config(rc), 4);
  write_text(tmp / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nok\n");
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(tmp / "vocab.txt");
  const std::string ckpt = tmp / "final";
  save_checkpoint(
      ckpt, {&src.params(), nullptr, TrainerState{}, bert_hf_config(rc.model, 0), to_toml(rc), tok.get()});
  fs::remove(fs::path(ckpt) / "config.toml");
  fs::remove(fs::path(ckpt) / "checksums.json");
  const PretrainedInfo info = read_pretrained(ckpt);
  CHECK(info.format == "hf");
  CHECK(info.hf_config.contains("saobp_tokenizer_fingerprint"));
  CHECK(info.model.attention.variant == AttnVariant::bp_high);
  CHECK(info.model.hidden == 16);
  CHECK(info.model.max_positions == 24);
  CHECK(info.has_tokenizer);
}

TEST_CASE("pretrained: GPT2LMHeadModel and the original gpt2 layout", "[finetune]") {
  DecoderConfig dc;
  dc.vocab = 50, dc.max_positions = 16, dc.hidden = 16, dc.layers = 2, dc.heads = 2, dc.intermediate = 64;
  GPT2LMHeadModel src(dc, 5);
  // The original gpt2 config.json's key set (no n_inner: 4 * n_embd).
  const json cfg = json::parse(R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 49, "embd_pdrop": 0.1, "eos_token_id": 49, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 16, "n_embd": 16, "n_head": 2,
    "n_layer": 2, "n_positions": 16, "resid_pdrop": 0.1, "summary_activation": null,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
    "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
    "vocab_size": 50})");
  const std::vector<std::string> names = names_of(src.params());
  REQUIRE(names.size() == 28);

  SECTION("GPT2LMHeadModel: transformer.* names, lm_head.weight unused") {
    TmpDir tmp("gpt2lm");
    std::vector<NamedTensor> ts;
    for (const Var& p : src.params().all()) ts.push_back({p.name(), p.data()});
    ts.push_back({"lm_head.weight", src.params().get("transformer.wte.weight").data()});
    save_safetensors(tmp / "model.safetensors", ts);
    write_text(tmp / "config.json", cfg.dump());

    const PretrainedInfo info = read_pretrained(tmp.str());
    CHECK(info.format == "hf");
    CHECK(info.architecture == "GPT2LMHeadModel");
    CHECK(info.model.family == "gpt2");
    CHECK(info.model.intermediate == 64);
    CHECK_FALSE(info.has_tokenizer);
    GPT2LMHeadModel dst(decoder_config(with_model(info.model)), 6);
    const InitReport r = init_from_pretrained(tmp.str(), dst.params(), {});
    CHECK(r.loaded == names);
    CHECK(r.renamed.empty());
    CHECK(r.initialized.empty());
    CHECK(r.unused == std::vector<std::string>{"lm_head.weight"});
    for (const Var& p : src.params().all()) CHECK(bitwise_equal(dst.params().get(p.name()).data(), p.data()));
  }

  SECTION("the original gpt2 layout: no prefix, attn.bias buffers unused, a new score head") {
    TmpDir tmp("gpt2orig");
    std::vector<NamedTensor> ts;
    for (const Var& p : src.params().all()) ts.push_back({p.name().substr(12), p.data()});  // "transformer."
    std::vector<float> tril(16 * 16);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) tril[static_cast<size_t>(i * 16 + j)] = j <= i;
    for (int l = 0; l < 2; ++l) {
      ts.push_back({fmt::format("h.{}.attn.bias", l), Tensor::from_vector(tril, {1, 1, 16, 16})});
      ts.push_back(
          {fmt::format("h.{}.attn.masked_bias", l), Tensor::from_vector(std::vector<float>{-1e4f}, {})});
    }
    save_safetensors(tmp / "model.safetensors", ts);
    write_text(tmp / "config.json", cfg.dump());
    write_text(tmp / "vocab.json", R"({"a": 0})");
    write_text(tmp / "merges.txt", "#version: 0.2\n");

    const PretrainedInfo info = read_pretrained(tmp.str());
    CHECK(info.has_tokenizer);
    GPT2LMHeadModel dst(decoder_config(with_model(info.model)), 6);
    dst.params().add("score.weight", {2, 16}, Init::normal);
    const InitReport r = init_from_pretrained(tmp.str(), dst.params(), {"score."});
    CHECK(r.loaded == names);
    CHECK(r.renamed.size() == 28);
    CHECK(r.renamed.at("transformer.h.1.attn.c_attn.weight") == "h.1.attn.c_attn.weight");
    CHECK(r.initialized == std::vector<std::string>{"score.weight"});
    CHECK(r.unused == std::vector<std::string>{"h.0.attn.bias", "h.0.attn.masked_bias", "h.1.attn.bias",
                                               "h.1.attn.masked_bias"});
    for (const Var& p : src.params().all()) CHECK(bitwise_equal(dst.params().get(p.name()).data(), p.data()));
  }
}

TEST_CASE("pretrained: shape mismatches and missing tensors are errors naming them", "[finetune]") {
  BertEncoder src(tiny_bert(), 1);
  BertEncoder dst(tiny_bert(), 2);
  const Tensor before = clone(dst.params().get("bert.embeddings.LayerNorm.weight").data());

  SECTION("shape") {
    TmpDir tmp("shape");
    write_bertmodel_folder(tmp.str(), src.params(), [](std::vector<NamedTensor>& ts) {
      for (NamedTensor& t : ts)
        if (t.name == "encoder.layer.1.intermediate.dense.weight") t.tensor = Tensor::zeros({33, 16});
    });
    CHECK_ERROR(init_from_pretrained(tmp.str(), dst.params(), {}),
                Contains(tmp / "model.safetensors") &&
                    Contains("'encoder.layer.1.intermediate.dense.weight'") && Contains("[33, 16]") &&
                    Contains("[32, 16]"));
  }
  SECTION("missing body tensor") {
    TmpDir tmp("missing");
    write_bertmodel_folder(tmp.str(), src.params(), [](std::vector<NamedTensor>& ts) {
      std::erase_if(ts, [](const NamedTensor& t) { return t.name == "encoder.layer.1.output.dense.weight"; });
    });
    CHECK_ERROR(init_from_pretrained(tmp.str(), dst.params(), {}),
                Contains(tmp / "model.safetensors") &&
                    Contains("'bert.encoder.layer.1.output.dense.weight' is missing") &&
                    Contains("'encoder.layer.1.output.dense.weight'"));
    // A new head is only what head_prefixes names.
    TmpDir ok("missing-ok");
    write_bertmodel_folder(ok.str(), src.params());
    add_classifier(dst.params(), 16);
    CHECK_ERROR(init_from_pretrained(ok.str(), dst.params(), {"bert.pooler."}),
                Contains("'classifier.weight' is missing") && Contains("and 1 more"));
  }
  SECTION("no model.safetensors") {
    TmpDir tmp("noweights");
    write_text(tmp / "pytorch_model.bin", "x");
    CHECK_ERROR(init_from_pretrained(tmp.str(), dst.params(), {}),
                Contains(tmp / "model.safetensors") && Contains("pytorch_model.bin"));
  }
  // A failed init leaves the parameters as they were.
  CHECK(bitwise_equal(dst.params().get("bert.embeddings.LayerNorm.weight").data(), before));
}

TEST_CASE("pretrained: config.json keys map to the model section and what we lack is refused", "[finetune]") {
  const ModelSection base = model_section_from_hf(json::parse(R"({
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
    "num_hidden_layers": 12, "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": 30522})"),
                                                  "bert-base-uncased/config.json");
  CHECK(base.family == "bert");
  CHECK(base.preset == "custom");
  CHECK(base.hidden == 768);
  CHECK(base.layers == 12);
  CHECK(base.heads == 12);
  CHECK(base.intermediate == 3072);
  CHECK(base.max_positions == 512);
  CHECK(base.vocab_size == 30522);
  CHECK(base.dropout == 0.1);
  CHECK(base.attention.variant == AttnVariant::original);
  CHECK(base.positions == "learned");

  const ModelSection g = model_section_from_hf(
      json::parse(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 128,
                      "n_inner": null, "vocab_size": 100, "resid_pdrop": 0.0,
                      "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05})"),
      "c.json");
  CHECK(g.family == "gpt2");
  CHECK(g.intermediate == 256);
  CHECK(g.max_positions == 128);
  CHECK(g.hidden == 64);
  CHECK(g.layers == 3);
  CHECK(g.dropout == 0.0);

  SECTION("saobp_* fields round trip through our own config.json") {
    ModelSection b = base;
    b.hidden = 64, b.heads = 4, b.layers = 2, b.intermediate = 128,
    b.attention.variant = AttnVariant::bp_high;
    b.attention.lambda = 0.15, b.attention.layer_lambdas = {0.1, 0.2}, b.attention.learnable_lambda = true,
    b.positions = "rope";
    CHECK(model_section_from_hf(bert_hf_config(b, 0), "b.json") == b);
    json task = bert_hf_config(b, 0);  // a task checkpoint's config.json names its task
    task["saobp_task"] = "sst2";
    task["architectures"] = {"BertForSequenceClassification"};
    task["id2label"] = {{"0", "negative"}, {"1", "positive"}};
    CHECK(model_section_from_hf(task, "t.json") == b);
    ModelSection d = g;
    d.attention.variant = AttnVariant::bp_low, d.attention.bp_steps = 2, d.positions = "none",
    d.attention.lambda = 0.05;
    CHECK(model_section_from_hf(gpt2_hf_config(d, 99), "d.json") == d);
  }

  SECTION("refusals name the file, the key and the value") {
    const json bert = bert_base_style_config();
    const json gpt2 = {{"model_type", "gpt2"}, {"n_embd", 16}, {"n_head", 2}, {"n_layer", 1}};
    struct Case {
      json cfg;
      const char* key;
      const char* value;
    };
    const auto with = [](json j, const char* key, json v) {
      j[key] = std::move(v);
      return j;
    };
    const std::vector<Case> cases = {
        {with(bert, "hidden_act", "relu"), "hidden_act", "\"relu\""},
        {with(bert, "hidden_act", "gelu_new"), "hidden_act", "\"gelu_new\""},
        {with(bert, "layer_norm_eps", 1e-5), "layer_norm_eps", "1e-05"},
        {with(bert, "type_vocab_size", 1), "type_vocab_size", "1"},
        {with(bert, "position_embedding_type", "relative_key"), "position_embedding_type", "relative_key"},
        {with(bert, "is_decoder", true), "is_decoder", "true"},
        {with(bert, "model_type", "roberta"), "model_type", "roberta"},
        {with(bert, "hidden_size", "16"), "hidden_size", "\"16\""},
        {with(bert, "num_attention_heads", 3), "num_attention_heads", "3 heads"},
        {with(bert, "saobp_attention", "bp_magic"), "saobp_attention", "bp_magic"},
        {with(bert, "saobp_fancy", 1), "saobp_fancy", "1"},
        {with(bert, "saobp_positions", "alibi"), "saobp_positions", "alibi"},
        {with(gpt2, "activation_function", "relu"), "activation_function", "relu"},
        {with(gpt2, "layer_norm_epsilon", 1e-6), "layer_norm_epsilon", "1e-06"},
        {with(gpt2, "tie_word_embeddings", false), "tie_word_embeddings", "false"},
        {with(gpt2, "scale_attn_by_inverse_layer_idx", true), "scale_attn_by_inverse_layer_idx", "true"},
    };
    for (const Case& c : cases) {
      INFO(c.cfg.dump());
      CHECK_ERROR(model_section_from_hf(c.cfg, "m/config.json"),
                  Contains("[pretrained] m/config.json: ") && Contains(c.key) && Contains(c.value));
    }
    CHECK_ERROR(model_section_from_hf(json::array(), "m/config.json"), Contains("not a JSON object"));
    CHECK_ERROR(model_section_from_hf(json::object(), "m/config.json"), Contains("no model_type"));
  }

  SECTION("read_pretrained refuses a folder without a config, naming it") {
    TmpDir tmp("noconfig");
    CHECK_ERROR(read_pretrained(tmp.str()), Contains(tmp.str()) && Contains("no config.toml or config.json"));
    CHECK_ERROR(read_pretrained(tmp / "absent"), Contains("not a folder"));
    write_text(tmp / "config.json", R"({"model_type": "t5"})");
    CHECK_ERROR(read_pretrained(tmp.str()), Contains(tmp / "config.json") && Contains("\"t5\""));
  }
}

TEST_CASE("pretrained: F16, BF16 and F64 tensors are converted to the model's dtype", "[finetune]") {
  TmpDir tmp("half");
  // F16: 1, -2, the smallest subnormal 2^-24, -0, the largest finite 65504, 0x3555 = 0.333251953125
  // (an infinite weight is refused: init_from_pretrained checks every tensor is finite)
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x8000, 0x7BFF, 0x3555};
  const std::vector<float> f16_want = {1.0f, -2.0f, 0x1p-24f, -0.0f, 65504.0f, 0.333251953125f};
  // BF16: 1, -3, 0x3EAB = 0.333984375
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x3EAB};
  const std::vector<float> bf16_want = {1.0f, -3.0f, 0.333984375f};
  const std::vector<double> f64 = {0.1, -2.5};
  write_raw_safetensors(tmp / "model.safetensors", {{"bert.h", "F16", {2, 3}, raw_bytes(f16)},
                                                    {"bert.b", "BF16", {3}, raw_bytes(bf16)},
                                                    {"bert.d", "F64", {2}, raw_bytes(f64)}});
  CHECK_ERROR(load_safetensors(tmp / "model.safetensors"), Contains("unsupported dtype \"F16\""));
  const SafetensorsFile wide = load_safetensors_widened(tmp / "model.safetensors");
  CHECK(wide.get("bert.h").dtype() == DType::f32);
  CHECK(wide.get("bert.b").dtype() == DType::f32);
  CHECK(wide.get("bert.d").dtype() == DType::f64);

  ParamStore P(1, DType::f32, Device::cpu());
  P.add("bert.h", {2, 3}, Init::normal);
  P.add("bert.b", {3}, Init::normal);
  P.add("bert.d", {2}, Init::normal);
  const InitReport r = init_from_pretrained(tmp.str(), P, {});
  CHECK(r.loaded.size() == 3);
  CHECK(bitwise_equal(P.get("bert.h").data(), Tensor::from_vector(f16_want, {2, 3})));
  CHECK(bitwise_equal(P.get("bert.b").data(), Tensor::from_vector(bf16_want, {3})));
  CHECK(bitwise_equal(P.get("bert.d").data(), Tensor::from_vector(std::vector<float>{0.1f, -2.5f}, {2})));

  ParamStore Q(1, DType::f64, Device::cpu());
  Q.add("bert.b", {3}, Init::normal);
  Q.add("bert.h", {2, 3}, Init::normal);
  Q.add("bert.d", {2}, Init::normal);
  init_from_pretrained(tmp.str(), Q, {});
  CHECK(Q.get("bert.b").data().to_vector<double>() == std::vector<double>{1.0, -3.0, 0.333984375});
  CHECK(Q.get("bert.d").data().to_vector<double>() == f64);

  // An integer tensor is not a weight.
  write_raw_safetensors(tmp / "model.safetensors",
                        {{"bert.h", "I32", {2, 3}, raw_bytes(std::vector<int32_t>(6))},
                         {"bert.b", "BF16", {3}, raw_bytes(bf16)},
                         {"bert.d", "F64", {2}, raw_bytes(f64)}});
  CHECK_ERROR(init_from_pretrained(tmp.str(), P, {}), Contains("'bert.h' is i32"));
}
