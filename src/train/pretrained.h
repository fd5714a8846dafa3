// Starting a run from a pretrained model folder (`--init DIR`): our checkpoints, and Hugging
// Face model folders as published (config.json without saobp_* fields, model.safetensors,
// vocab.txt / vocab.json + merges.txt / tokenizer.json) for the BertForMaskedLM, BertModel,
// BertForPreTraining, BertForSequenceClassification, GPT2Model and GPT2LMHeadModel layouts
// (e.g. the original bert-base-uncased and gpt2 folders).
//
// Every tensor of the model is looked up by name in the file, trying in order: the name itself;
// without the family prefix (BertModel and GPT2Model folders have no "bert." / "transformer.");
// the legacy LayerNorm names (".gamma" / ".beta" for ".weight" / ".bias"). A tensor found with
// another shape is an error naming it; a tensor not found is an error unless it belongs to the
// new head (its name starts with one of `head_prefixes`), which keeps its fresh initialization.
// File tensors the model does not take (the MLM head, buffers such as "attn.bias") are unused.
// F16, BF16 and F64 tensors are converted to the model's dtype.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/params.h"
#include "train/config.h"

namespace saobp {

struct PretrainedInfo {
  std::string dir;
  std::string format;          // "saobp" (config.toml present) | "hf" (config.json only)
  std::string architecture;    // config.json's architectures[0] ("" when absent)
  ModelSection model;          // the model section: ours from config.toml, else from config.json
  nlohmann::json hf_config;    // config.json as read (null when absent)
  bool has_tokenizer = false;  // tokenizer files in dir (load_tokenizer(dir) works)
};

// Reads DIR's config (config.toml, else config.json) into a ModelSection (preset "custom").
// Errors name the file and the key: an unknown model_type, an activation, position embedding
// type, layer-norm eps or type-vocab size our models do not implement.
PretrainedInfo read_pretrained(const std::string& dir);

// The ModelSection of a Hugging Face config.json (model_type bert or gpt2). saobp_* fields are
// honoured when present (attention variant, λ, positions); without them, softmax attention.
ModelSection model_section_from_hf(const nlohmann::json& cfg, const std::string& file);

struct InitReport {
  std::string source;                          // the model.safetensors read
  std::vector<std::string> loaded;             // model tensors filled from the file
  std::vector<std::string> initialized;        // model tensors not in the file (the new head)
  std::vector<std::string> unused;             // file tensors the model does not take
  std::map<std::string, std::string> renamed;  // model name -> file name, where they differ
  nlohmann::json to_json() const;              // the init_report.json object
  std::string summary() const;                 // a few lines for the log
};

// Fills `params` from DIR/model.safetensors as described above.
InitReport init_from_pretrained(const std::string& dir, ParamStore& params,
                                const std::vector<std::string>& head_prefixes);

}  // namespace saobp
