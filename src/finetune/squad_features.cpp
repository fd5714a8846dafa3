// SQuAD features and predictions, after google-research/bert run_squad.py (read_squad_examples,
// convert_examples_to_features, _improve_answer_span, _check_is_max_context, write_predictions,
// get_final_text, _get_best_indexes). Where we differ, the comment at the place says why.
#include "finetune/squad_features.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "data/unicode.h"

namespace saobp::squad {

namespace {

// run_squad.py's _is_whitespace: the only characters that separate context words.
bool is_squad_space(int32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

// A context split into words, each word tokenized on its own (prefix_space: as " word").
struct Doc {
  std::vector<std::pair<int32_t, int32_t>> word_spans;  // [begin, end) bytes of each word
  std::vector<int32_t> cp_word;   // per code point: run_squad's char_to_word_offset (-1 before any word)
  std::vector<int32_t> cp_byte;   // per code point: its first byte; one more entry = context size
  std::vector<int32_t> ids;       // all context tokens (all_doc_tokens)
  std::vector<int32_t> tok_word;  // per token: its word (tok_to_orig_index)
  std::vector<int32_t> word_tok;  // per word: its first token (orig_to_tok_index)
};

Doc split_context(const std::string& context, const Tokenizer& tok, bool prefix_space) {
  Doc d;
  bool prev_space = true;
  size_t i = 0;
  while (i < context.size()) {
    const size_t at = i;
    const int32_t c = uni::next_cp(context, i);  // valid: checked by the caller
    d.cp_byte.push_back(static_cast<int32_t>(at));
    if (is_squad_space(c)) {
      prev_space = true;
    } else {
      if (prev_space) d.word_spans.emplace_back(static_cast<int32_t>(at), static_cast<int32_t>(at));
      prev_space = false;
      d.word_spans.back().second = static_cast<int32_t>(i);
    }
    d.cp_word.push_back(static_cast<int32_t>(d.word_spans.size()) - 1);
  }
  d.cp_byte.push_back(static_cast<int32_t>(context.size()));
  for (size_t w = 0; w < d.word_spans.size(); ++w) {
    const auto [b, e] = d.word_spans[w];
    d.word_tok.push_back(static_cast<int32_t>(d.ids.size()));
    const std::string_view word = std::string_view(context).substr(b, e - b);
    for (const int32_t id : prefix_space ? tok.encode(" " + std::string(word)) : tok.encode(word)) {
      d.ids.push_back(id);
      d.tok_word.push_back(static_cast<int32_t>(w));
    }
  }
  return d;
}

// Python's " ".join(s.split()) (whitespace_tokenize), with Unicode White_Space.
std::string join_split(std::string_view s) {
  std::string out;
  bool pending = false;
  size_t i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const int32_t c = uni::next_cp(s, i);
    if (uni::is_whitespace(c)) {
      pending = !out.empty();
      continue;
    }
    if (pending) out += ' ';
    pending = false;
    out.append(s.substr(at, i - at));
  }
  return out;
}

int64_t count_cps(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) uni::next_cp(s, i);
  return n;
}

struct Span {
  int64_t start, length;  // in context tokens
};

// _check_is_max_context: the span where `pos` has the most context on its shorter side (ties
// to the longer span, then to the first).
bool is_max_context(const std::vector<Span>& spans, size_t cur, int64_t pos) {
  double best = 0;
  int64_t best_index = -1;
  for (size_t k = 0; k < spans.size(); ++k) {
    const int64_t end = spans[k].start + spans[k].length - 1;
    if (pos < spans[k].start || pos > end) continue;
    const double score = static_cast<double>(std::min(pos - spans[k].start, end - pos)) +
                         0.01 * static_cast<double>(spans[k].length);
    if (best_index < 0 || score > best) best = score, best_index = static_cast<int64_t>(k);
  }
  return best_index == static_cast<int64_t>(cur);
}

// _get_best_indexes: the n highest logits' indices, ties in index order.
std::vector<int32_t> best_indexes(const std::vector<float>& logits, int64_t n) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (static_cast<int64_t>(idx.size()) > n) idx.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
  return idx;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// Appends the normalized form of `s` (see final_text) to `out`; `from` gets, per byte appended,
// the [begin, end) bytes in `s` of the code point it came from.
void normalize(std::string_view s, std::string& out, std::vector<std::pair<size_t, size_t>>* from) {
  size_t i = 0;
  std::string one, lowered;
  while (i < s.size()) {
    const size_t at = i;
    const int32_t c = uni::next_cp(s, i);
    if (c < 0 || c == 0 || c == 0xFFFD || uni::is_whitespace(c) || is_squad_space(c) || uni::is_other(c))
      continue;
    one.clear();
    uni::append_utf8(one, c);
    const std::string dec = uni::nfd(one);
    lowered.clear();
    size_t j = 0;
    while (j < dec.size()) {
      const int32_t d = uni::next_cp(dec, j);
      if (!uni::is_nonspacing_mark(d)) uni::append_lower(lowered, d);
    }
    out += lowered;
    if (from) from->insert(from->end(), lowered.size(), {at, i});
  }
}

}  // namespace

std::string final_text(std::string_view pred, std::string_view orig) {
  std::string p, o;
  std::vector<std::pair<size_t, size_t>> from;
  normalize(pred, p, nullptr);
  normalize(orig, o, &from);
  const size_t at = p.empty() ? std::string::npos : o.find(p);
  if (at == std::string::npos) return std::string(orig);
  const size_t begin = from[at].first, end = from[at + p.size() - 1].second;
  return std::string(orig.substr(begin, end - begin));
}

Features make_features(const std::vector<bench::SquadExample>& examples, const Tokenizer& tok,
                       const FeatureOptions& opt) {
  const SpecialTokens& sp = tok.special();
  if (opt.decoder) {
    SAOBP_CHECK(sp.eos >= 0, "squad", "the tokenizer ({}) has no <|endoftext|> token", tok.kind());
  } else {
    SAOBP_CHECK(sp.cls >= 0, "squad", "the tokenizer ({}) has no [CLS] token", tok.kind());
    SAOBP_CHECK(sp.sep >= 0, "squad", "the tokenizer ({}) has no [SEP] token", tok.kind());
  }
  // Specials per feature: [CLS] [SEP] [SEP], or two <|endoftext|>.
  const int64_t specials = opt.decoder ? 2 : 3;
  SAOBP_CHECK(opt.max_query_length >= 0 && opt.max_length > opt.max_query_length + specials, "squad",
              "max_length ({}) must exceed max_query_length ({}) + {}", opt.max_length, opt.max_query_length,
              specials);
  SAOBP_CHECK(opt.doc_stride >= 1, "squad", "doc_stride ({}) must be at least 1", opt.doc_stride);

  Features out;
  out.word_spans.resize(examples.size());
  Doc doc;
  const std::string* doc_of = nullptr;  // consecutive questions on one paragraph share its Doc
  for (size_t e = 0; e < examples.size(); ++e) {
    const bench::SquadExample& ex = examples[e];
    for (const std::string* s : {&ex.context, &ex.question}) {
      const size_t bad = uni::find_invalid_utf8(*s);
      SAOBP_CHECK(bad == std::string::npos, "squad", "example {}: {} is not UTF-8 at byte {}", ex.id,
                  s == &ex.context ? "the context" : "the question", bad);
    }
    if (!doc_of || *doc_of != ex.context)
      doc = split_context(ex.context, tok, opt.decoder), doc_of = &ex.context;
    out.word_spans[e] = doc.word_spans;
    const auto ndoc = static_cast<int64_t>(doc.ids.size());

    std::vector<int32_t> q = tok.encode(ex.question);
    if (static_cast<int64_t>(q.size()) > opt.max_query_length) {
      q.resize(static_cast<size_t>(opt.max_query_length));
      ++out.truncated_questions;
    }

    // The answer in context tokens (inclusive); has_answer false: every feature points at its null
    // position.
    bool has_answer = false;
    int64_t tok_start = 0, tok_end = 0;
    if (opt.training && !ex.is_impossible && !ex.answers.empty()) {
      const bench::SquadAnswer& a = ex.answers.front();  // SQuAD's train files hold one answer
      const int64_t n_cp = count_cps(a.text);
      const auto ncps = static_cast<int64_t>(doc.cp_word.size());
      if (n_cp == 0 || a.char_start < 0 || a.char_start + n_cp > ncps) {
        ++out.skipped_examples;
        continue;
      }
      // A leading whitespace character maps to the word before it (-1 at the very start; run_squad
      // would index from the end there).
      const int32_t w0 = std::max(doc.cp_word[static_cast<size_t>(a.char_start)], 0);
      const int32_t w1 = std::max(doc.cp_word[static_cast<size_t>(a.char_start + n_cp - 1)], w0);
      // Only answers whose text is recoverable from the words are kept ("Could not find answer").
      std::string actual;
      for (int32_t w = w0; w <= w1; ++w) {
        if (w > w0) actual += ' ';
        const auto [b, en] = doc.word_spans[static_cast<size_t>(w)];
        actual.append(ex.context, static_cast<size_t>(b), static_cast<size_t>(en - b));
      }
      if (actual.find(join_split(a.text)) == std::string::npos) {
        ++out.skipped_examples;
        continue;
      }
      tok_start = doc.word_tok[static_cast<size_t>(w0)];
      tok_end = static_cast<size_t>(w1) + 1 < doc.word_tok.size()
                    ? doc.word_tok[static_cast<size_t>(w1) + 1] - 1
                    : ndoc - 1;
      // _improve_answer_span: the first (leftmost start, then longest) sub-span whose tokens are
      // those of the answer text alone. The decoder's words carry a space before them, so the
      // answer is tried that way first (an answer starting a word), then as it stands (one
      // starting inside a word, e.g. "1981" of "(1981)").
      std::vector<std::vector<int32_t>> forms;
      if (opt.decoder) forms.push_back(tok.encode(" " + a.text));
      forms.push_back(tok.encode(a.text));
      bool improved = false;
      for (const std::vector<int32_t>& ans : forms)
        for (int64_t s = tok_start; s <= tok_end && !improved; ++s)
          for (int64_t en = tok_end; en >= s; --en)
            if (std::equal(doc.ids.begin() + s, doc.ids.begin() + en + 1, ans.begin(), ans.end())) {
              tok_start = s, tok_end = en, improved = true;
              break;
            }
      // Answer words with no tokens at all (e.g. only U+00AD) cannot be labeled.
      has_answer = tok_end >= tok_start;
    }

    // The sliding window over the context tokens.
    const int64_t max_doc = opt.max_length - static_cast<int64_t>(q.size()) - specials;
    std::vector<Span> spans;
    for (int64_t start = 0; start < ndoc;) {
      const int64_t length = std::min(ndoc - start, max_doc);
      spans.push_back({start, length});
      if (start + length == ndoc) break;
      start += std::min(length, opt.doc_stride);
    }
    // run_squad.py makes no feature for a context without tokens; one feature with an empty
    // chunk keeps every example present in the predictions.
    if (spans.empty()) spans.push_back({0, 0});
    if (spans.size() > 1) ++out.split_contexts;

    // The chunk starts after [CLS] question [SEP] (encoder) or question <|endoftext|> (decoder).
    const auto offset = static_cast<int64_t>(q.size()) + specials - 1;
    const int32_t segment_b = opt.decoder ? 0 : 1;  // the chunk's token type
    for (size_t k = 0; k < spans.size(); ++k) {
      const Span sp_k = spans[k];
      Feature f;
      f.example = static_cast<int64_t>(e);
      f.context_offset = offset;
      const size_t L = static_cast<size_t>(offset + sp_k.length + 1);
      f.ids.reserve(L);
      if (!opt.decoder) f.ids.push_back(sp.cls);
      f.ids.insert(f.ids.end(), q.begin(), q.end());
      f.ids.push_back(opt.decoder ? sp.eos : sp.sep);
      f.types.assign(static_cast<size_t>(offset), 0);
      f.token_word.assign(static_cast<size_t>(offset), -1);
      f.max_context.assign(static_cast<size_t>(offset), 0);
      for (int64_t t = sp_k.start; t < sp_k.start + sp_k.length; ++t) {
        f.ids.push_back(doc.ids[static_cast<size_t>(t)]);
        f.types.push_back(segment_b);
        f.token_word.push_back(doc.tok_word[static_cast<size_t>(t)]);
        f.max_context.push_back(is_max_context(spans, k, t) ? 1 : 0);
      }
      f.ids.push_back(opt.decoder ? sp.eos : sp.sep);
      f.types.push_back(segment_b);
      f.token_word.push_back(-1);
      f.max_context.push_back(0);
      f.null_index = opt.decoder ? static_cast<int32_t>(L - 1) : 0;
      f.start = f.end = f.null_index;
      if (has_answer) {
        if (tok_start >= sp_k.start && tok_end <= sp_k.start + sp_k.length - 1) {
          f.start = static_cast<int32_t>(tok_start - sp_k.start + offset);
          f.end = static_cast<int32_t>(tok_end - sp_k.start + offset);
        } else {
          ++out.unanswerable_chunks;
        }
      }
      out.features.push_back(std::move(f));
    }
  }
  return out;
}

std::map<std::string, std::string> predict(const std::vector<bench::SquadExample>& examples,
                                           const Features& feats,
                                           const std::vector<std::vector<float>>& start_logits,
                                           const std::vector<std::vector<float>>& end_logits,
                                           const Tokenizer& tok, const PredictOptions& opt,
                                           std::map<std::string, double>* null_odds) {
  const size_t F = feats.features.size();
  SAOBP_CHECK(start_logits.size() == F && end_logits.size() == F, "squad",
              "{} features but {} start and {} end logit rows", F, start_logits.size(), end_logits.size());
  SAOBP_CHECK(feats.word_spans.size() == examples.size(), "squad",
              "features made for {} examples, predicting {}", feats.word_spans.size(), examples.size());
  std::vector<std::vector<size_t>> of_example(examples.size());
  for (size_t f = 0; f < F; ++f) {
    const Feature& ft = feats.features[f];
    SAOBP_CHECK(ft.example >= 0 && static_cast<size_t>(ft.example) < examples.size(), "squad",
                "feature {} names example {} of {}", f, ft.example, examples.size());
    SAOBP_CHECK(start_logits[f].size() == ft.ids.size() && end_logits[f].size() == ft.ids.size(), "squad",
                "feature {} has {} tokens but {} start and {} end logits", f, ft.ids.size(),
                start_logits[f].size(), end_logits[f].size());
    of_example[static_cast<size_t>(ft.example)].push_back(f);
  }
  const bool wordpiece = tok.kind() == "wordpiece";

  struct Prelim {
    size_t f;
    int32_t s, e;
    double score;
  };
  std::map<std::string, std::string> out;
  for (size_t x = 0; x < examples.size(); ++x) {
    const bench::SquadExample& ex = examples[x];
    const auto& spans = feats.word_spans[x];
    std::vector<Prelim> prelim;
    double score_null = std::numeric_limits<double>::infinity();
    for (const size_t f : of_example[x]) {
      const Feature& ft = feats.features[f];
      const std::vector<float>& sl = start_logits[f];
      const std::vector<float>& el = end_logits[f];
      if (!ft.ids.empty()) {
        const auto z = static_cast<size_t>(ft.null_index);
        SAOBP_CHECK(z < ft.ids.size(), "squad", "feature {}: null position {} of {} tokens", f, z,
                    ft.ids.size());
        score_null = std::min(score_null, static_cast<double>(sl[z]) + el[z]);
      }
      const std::vector<int32_t> starts = best_indexes(sl, opt.n_best), ends = best_indexes(el, opt.n_best);
      for (const int32_t s : starts)
        for (const int32_t e : ends) {
          if (ft.token_word[static_cast<size_t>(s)] < 0 || ft.token_word[static_cast<size_t>(e)] < 0)
            continue;
          if (!ft.max_context[static_cast<size_t>(s)] || e < s || e - s + 1 > opt.max_answer_length) continue;
          prelim.push_back(
              {f, s, e, static_cast<double>(sl[static_cast<size_t>(s)]) + el[static_cast<size_t>(e)]});
        }
    }
    // Sorted by score, ties in the order found (Python's stable sort). The n-best list of
    // write_predictions only drops later duplicates, so its head is prelim's head.
    std::stable_sort(prelim.begin(), prelim.end(),
                     [](const Prelim& a, const Prelim& b) { return a.score > b.score; });
    std::string text;
    if (null_odds && opt.version_2)
      (*null_odds)[ex.id] = prelim.empty() ? score_null : score_null - prelim.front().score;
    if (prelim.empty()) {
      // run_squad.py's nonce "empty" (v1.1); v2.0 answers "" where it would fail.
      text = opt.version_2 ? "" : "empty";
    } else {
      const Prelim& p = prelim.front();
      const Feature& ft = feats.features[p.f];
      // The context from the start word's first byte to the end word's last: the original
      // whitespace between words is kept where run_squad.py joins the words with one space.
      const int32_t b = spans[static_cast<size_t>(ft.token_word[static_cast<size_t>(p.s)])].first;
      const int32_t en = spans[static_cast<size_t>(ft.token_word[static_cast<size_t>(p.e)])].second;
      const std::string_view orig =
          std::string_view(ex.context).substr(static_cast<size_t>(b), static_cast<size_t>(en - b));
      std::string pieces;
      if (wordpiece) {
        for (int32_t k = p.s; k <= p.e; ++k) {
          if (k > p.s) pieces += ' ';
          pieces += tok.id_to_token(ft.ids[static_cast<size_t>(k)]);
        }
        replace_all(pieces, " ##", "");
        replace_all(pieces, "##", "");
      } else {
        pieces = tok.decode(std::vector<int32_t>(ft.ids.begin() + p.s, ft.ids.begin() + p.e + 1));
      }
      text = final_text(pieces, orig);
      // v2.0: "" when the least null score of the example's features beats the best span by
      // more than the threshold.
      if (opt.version_2 && score_null - p.score > opt.null_threshold) text.clear();
    }
    out[ex.id] = std::move(text);
  }
  return out;
}

}  // namespace saobp::squad
