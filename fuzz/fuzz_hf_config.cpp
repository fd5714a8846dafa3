// A Hugging Face model folder's config.json as `--init` and `eval --checkpoint` read it
// (src/train/pretrained.cpp: read_pretrained, model_section_from_hf), then the model section it
// gives must be a valid config (an Error there is a finding): the encoder or decoder config is
// built from it. Selector byte:
// bit 0 adds a vocab.txt (the folder has a tokenizer); the rest is config.json.
#include "harness.h"
#include "train/config.h"
#include "train/pretrained.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  fuzz::put(in.dir, "config.json", in.part(true));
  if (in.sel & 1) fuzz::put(in.dir, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
  PretrainedInfo info;
  try {
    info = read_pretrained(in.dir.string());
  } catch (const Error&) {
    return 0;  // the expected rejection
  }
  // What read_pretrained accepts is a model saobp builds: an Error here escapes (a finding).
  RunConfig c;
  c.model = info.model;
  c.train.seq_len = 1;
  c.data.vocab_size = info.model.vocab_size;
  validate_config(c);
  if (c.model.family == "gpt2")
    (void)decoder_config(c);
  else
    (void)encoder_config(c);
  return 0;
}
