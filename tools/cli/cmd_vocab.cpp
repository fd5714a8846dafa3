// `saobp vocab --kind wordpiece|bpe --size N CORPUS... --out DIR`: trains a vocabulary on corpora
// (data/corpus.h formats) with VocabTrainer and writes the Hugging Face files into DIR.
#include <chrono>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "data/corpus.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"

namespace saobp::cli {

namespace {

struct VocabCli {
  std::string kind, out, format = "text", text_field = "text";
  int64_t size = 0, min_frequency = 2;
  bool cased = false;
  std::vector<std::string> corpora;
};

// The vocabulary's files must not land on what the command reads: inside a corpus folder (a
// later run over that folder would read them as text), over a corpus file, or into a checkpoint
// (its tokenizer is part of its checksummed files).
void check_vocab_out(const VocabCli& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(o.out) / "checksums.json", ec))
    fail("vocab",
         "--out {} is a checkpoint: its tokenizer is part of its saved files; write the vocabulary "
         "elsewhere",
         o.out);
  for (const std::string& corpus : o.corpora)
    if (fs::is_directory(corpus, ec) && lies_within(o.out, corpus))
      fail("vocab",
           "--out {} lies inside the corpus folder {}: a run over that folder would read the vocabulary as "
           "text; write it elsewhere",
           o.out, corpus);
  for (const char* name :
       {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"})
    refuse_output_over_inputs((fs::path(o.out) / name).string(), "--out", o.corpora);
}

int run_vocab(const VocabCli& o) {
  check_vocab_out(o);
  const auto t0 = std::chrono::steady_clock::now();
  VocabTrainOptions opt;
  opt.kind = o.kind;
  opt.vocab_size = o.size;
  opt.min_frequency = o.min_frequency;
  opt.lowercase = !o.cased;
  VocabTrainer trainer(opt);
  int64_t docs = 0, bytes = 0;
  std::string text;
  for (const std::string& path : o.corpora) {
    CorpusSpec spec;
    spec.kind = o.format;
    spec.path = path;
    spec.text_field = o.text_field;
    for_each_document(spec, [&](const Document& d) {
      // One text per document, its lines joined by '\n' as the batchers see them.
      text.clear();
      for (size_t i = 0; i < d.lines.size(); ++i) {
        if (i) text += '\n';
        text += d.lines[i];
      }
      trainer.feed(text);
      ++docs;
      bytes += static_cast<int64_t>(text.size());
    });
  }
  const auto t1 = std::chrono::steady_clock::now();
  const std::unique_ptr<Tokenizer> tok = trainer.finish();
  const auto t2 = std::chrono::steady_clock::now();
  tok->save(o.out);
  const double read_s = std::chrono::duration<double>(t1 - t0).count();
  const double merge_s = std::chrono::duration<double>(t2 - t1).count();
  fmt::print(
      "{} vocabulary of {} tokens from {} documents ({:.2f} MB): counting {:.2f} s, merges {:.2f} s; wrote "
      "{}\n",
      tok->kind(), tok->vocab_size(), docs, static_cast<double>(bytes) / 1e6, read_s, merge_s, o.out);
  return 0;
}

}  // namespace

void register_vocab(CLI::App& app) {
  static VocabCli o;
  CLI::App* sub =
      app.add_subcommand("vocab", "Train a WordPiece or byte-level BPE vocabulary (Hugging Face files)");
  sub->add_option("--kind", o.kind, "wordpiece (BERT) or bpe (GPT-2 byte-level)")
      ->required()
      ->check(CLI::IsMember({"wordpiece", "bpe"}));
  sub->add_option("--size", o.size, "vocabulary size, specials and the initial alphabet included")
      ->required();
  sub->add_option("corpus", o.corpora, "corpus files or folders")->required();
  sub->add_option("--out", o.out, "output folder")->required()->check(non_empty_path());
  sub->add_option("--format", o.format, "corpus format")
      ->check(CLI::IsMember({"text", "fortune", "wikitext", "jsonl"}));
  CLI::Option* text_field =
      sub->add_option("--text-field", o.text_field, "jsonl: the field holding the text");
  sub->add_option("--min-frequency", o.min_frequency, "pairs seen fewer times are never merged");
  sub->add_flag("--cased", o.cased, "wordpiece: keep case and accents (no lowercasing)");
  add_command(sub, [text_field] {
    // Only a jsonl corpus has fields: elsewhere the option would be ignored without a word.
    if (text_field->count() > 0 && o.format != "jsonl")
      fail("vocab", "--text-field goes with --format jsonl (the format here is {})", o.format);
    return run_vocab(o);
  });
}

}  // namespace saobp::cli
