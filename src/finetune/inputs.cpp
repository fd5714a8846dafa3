#include "finetune/inputs.h"

#include <algorithm>

#include "core/error.h"
#include "data/batching.h"

namespace saobp::finetune {

namespace {

// a and b cut longest-first until la + lb <= budget. Returns whether anything was cut.
bool truncate_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t budget) {
  bool cut = false;
  while (static_cast<int64_t>(a.size() + b.size()) > budget) {
    std::vector<int32_t>& longer = a.size() >= b.size() ? a : b;
    longer.pop_back();
    cut = true;
  }
  return cut;
}

// RACE's second segment: the ending fills the question's "_" blank, or follows the question.
std::string race_second(const std::string& question, const std::string& ending) {
  const size_t blank = question.find('_');
  if (blank == std::string::npos) return question + " " + ending;
  return question.substr(0, blank) + ending + question.substr(blank + 1);
}

}  // namespace

InputEncoder::InputEncoder(const BenchmarkSpec& spec, const Tokenizer& tok, const EncodeOptions& opt,
                           const char* op, const std::string& vocab)
    : spec_(spec), tok_(&tok), opt_(opt) {
  const SpecialTokens& sp = tok_->special();
  if (opt_.family == "bert") {
    if (sp.cls < 0 || sp.sep < 0 || sp.pad < 0)
      fail(op, "data.vocab {}: a BERT input needs [CLS], [SEP] and [PAD] in the vocabulary", vocab);
    pad_ = sp.pad;
  } else {
    if (sp.eos < 0) fail(op, "data.vocab {}: GPT-2 inputs need <|endoftext|> in the vocabulary", vocab);
    pad_ = sp.eos;
  }
}

Item InputEncoder::text_item(const std::string& a, const std::string& b, bool& cut) const {
  std::vector<int32_t> ta = tok_->encode(a), tb = b.empty() ? std::vector<int32_t>() : tok_->encode(b);
  const bool pair = !b.empty(), bert = opt_.family == "bert";
  const SpecialTokens& sp = tok_->special();
  const int64_t specials = bert ? (pair ? 3 : 2) : (pair ? 1 : 0);
  cut = truncate_pair(ta, tb, opt_.seq_len - specials);
  std::vector<int32_t> ids, types;
  if (bert) {
    ids.push_back(sp.cls);
    ids.insert(ids.end(), ta.begin(), ta.end());
    ids.push_back(sp.sep);
    types.assign(ids.size(), 0);
    if (pair) {
      ids.insert(ids.end(), tb.begin(), tb.end());
      ids.push_back(sp.sep);
      types.resize(ids.size(), 1);
    }
  } else {
    ids = ta;
    if (pair) ids.push_back(sp.eos), ids.insert(ids.end(), tb.begin(), tb.end());
    if (ids.empty()) ids.push_back(sp.eos);  // an empty text: the end token stands for it
    types.assign(ids.size(), 0);
  }
  Item it;
  it.ids.push_back(std::move(ids)), it.types.push_back(std::move(types));
  return it;
}

std::vector<Item> InputEncoder::encode(const SplitData& d, bool training, int64_t& truncated,
                                       squad::Features* feats) const {
  std::vector<Item> items;
  truncated = 0;
  bool cut = false;
  switch (spec_.kind) {
    case Kind::classify:
    case Kind::regress:
      for (const bench::TextExample& e : d.text.examples) {
        Item it = text_item(e.text_a, e.text_b, cut);
        truncated += cut;
        it.label = e.label, it.score = static_cast<float>(e.score);
        items.push_back(std::move(it));
      }
      break;
    case Kind::choice: {
      const bool race = spec_.name.rfind("race/", 0) == 0;
      for (const bench::ChoiceExample& e : d.choice.examples) {
        Item it;
        bool any = false;
        for (const std::string& ending : e.endings) {
          Item row =
              text_item(e.context, race ? race_second(e.question, ending) : e.question + " " + ending, cut);
          any |= cut;
          it.ids.push_back(std::move(row.ids[0])), it.types.push_back(std::move(row.types[0]));
        }
        if (!items.empty() && it.ids.size() != items.front().ids.size())
          fail("finetune", "{}: example {} has {} endings, the first had {}", spec_.name, e.id, it.ids.size(),
               items.front().ids.size());
        truncated += any;
        it.label = e.label;
        items.push_back(std::move(it));
      }
      break;
    }
    case Kind::span: {
      squad::FeatureOptions o;
      o.max_length = opt_.seq_len, o.doc_stride = opt_.doc_stride;
      o.max_query_length = opt_.max_query_length, o.training = training;
      o.decoder = opt_.family == "gpt2";
      squad::Features f = squad::make_features(d.squad.examples, *tok_, o);
      truncated = f.split_contexts;
      for (squad::Feature& x : f.features) {
        Item it;
        it.ids.push_back(x.ids), it.types.push_back(x.types);
        it.start = x.start, it.end = x.end;
        items.push_back(std::move(it));
      }
      if (feats) *feats = std::move(f);
      break;
    }
    case Kind::lm:
      break;
  }
  if (training && items.empty()) fail("finetune", "{}: the {} split has no examples", spec_.name, d.split);
  return items;
}

Batch make_batch(const std::vector<Item>& items, const std::vector<int64_t>& which, int32_t pad) {
  Batch b;
  b.items = static_cast<int64_t>(which.size());
  b.rows_per_item = static_cast<int64_t>(items[static_cast<size_t>(which[0])].ids.size());
  std::vector<const std::vector<int32_t>*> ids, types;
  for (int64_t i : which) {
    const Item& it = items[static_cast<size_t>(i)];
    for (size_t k = 0; k < it.ids.size(); ++k) {
      ids.push_back(&it.ids[k]), types.push_back(&it.types[k]);
      b.lengths.push_back(static_cast<int64_t>(it.ids[k].size()));
    }
    b.labels.push_back(it.label), b.scores.push_back(it.score), b.starts.push_back(it.start),
        b.ends.push_back(it.end);
  }
  PaddedRows rows = pad_rows(ids, types, pad);
  b.ids = std::move(rows.ids), b.types = std::move(rows.types), b.mask = std::move(rows.mask);
  return b;
}

}  // namespace saobp::finetune
