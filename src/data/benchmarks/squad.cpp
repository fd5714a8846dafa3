// SQuAD v1.1 and v2.0 in the official distribution (rajpurkar.github.io/SQuAD-explorer:
// train-v1.1.json, dev-v1.1.json, train-v2.0.json, dev-v2.0.json), read as the official
// evaluate-v2.0.py reads it: one JSON document
//   {"version": "1.1" | "v2.0", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
//    "question", "answers": [{"text", "answer_start"}], "is_impossible" (v2.0),
//    "plausible_answers" (v2.0, impossible questions)}]}]}]}
// in any key order (the v2.0 files put "qas" before "context", v1.1 "version" after "data").
// answer_start counts Unicode code points of the context (Python str indices): an answer is
// checked against the context at that code point, and one whose text is not there is kept and
// counted in `misaligned` (answers and plausible answers alike). Every gold answer of a dev
// question is kept, in file order, duplicates included. Strings are kept verbatim (no strip()).
// Question ids are unique in a file (the evaluation keys its scores by them).
//
// The file is parsed one article at a time (each element of "data" is read and dropped as soon
// as the parser has it), so a 40 MB train file never sits in memory as a JSON tree. Bad values
// are reported as "FILE:LINE:COL: PATH: what" (json_where.h); the offending article is re-read
// for the position only when there is something to report. With skip_bad_rows a bad question
// (one element of "qas") is skipped and counted; a bad file, article or paragraph (no "data",
// a context that is not a string, ...) is always an error: it is not the SQuAD format.
#include <fmt/format.h>

#include <filesystem>
#include <unordered_set>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "data/benchmarks/benchmarks.h"
#include "data/benchmarks/json_where.h"
#include "data/unicode.h"

namespace saobp::bench {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Keeps the current JSON path while descending: push on construction, pop on destruction.
struct Step {
  JsonPath& path;
  Step(JsonPath& p, std::string key) : path(p) { path.push_back({std::move(key), -1}); }
  Step(JsonPath& p, int64_t index) : path(p) { path.push_back({"", index}); }
  ~Step() { path.pop_back(); }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
};

// obj[key] (obj at `path`), which must exist.
const json& member(const json& obj, const JsonPath& path, const char* key) {
  if (!obj.is_object()) bad_json(path, fmt::format("is {}, not an object", json_kind(obj)));
  const auto it = obj.find(key);
  if (it == obj.end()) bad_json(path, fmt::format("has no \"{}\"", key));
  return *it;
}

// obj[key] as a string / a list; `path` is obj's.
const std::string& string_at(const json& obj, JsonPath& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_string()) {
    Step s(path, key);
    bad_json(path, fmt::format("is {}, not a string", json_kind(v)));
  }
  return v.get_ref<const std::string&>();
}

const json& list_at(const json& obj, JsonPath& path, const char* key) {
  const json& v = member(obj, path, key);
  if (!v.is_array()) {
    Step s(path, key);
    bad_json(path, fmt::format("is {}, not a list", json_kind(v)));
  }
  return v;
}

// One paragraph's context with the byte offset of each code point (and of the end).
struct Context {
  const std::string& text;
  std::vector<size_t> byte_of;  // code point -> byte; byte_of.size() == code points + 1

  explicit Context(const std::string& t) : text(t) {
    byte_of.reserve(t.size() + 1);
    for (size_t i = 0; i < t.size();) {
      byte_of.push_back(i);
      uni::next_cp(t, i);  // valid UTF-8: the whole file was checked
    }
    byte_of.push_back(t.size());
  }
  int64_t code_points() const { return static_cast<int64_t>(byte_of.size()) - 1; }
};

struct Reader {
  const std::string& file;
  const std::string& text;  // the whole file
  const ReadOptions& opt;
  SquadDataset& ds;
  bool saw_is_impossible = false;
  // The question being read: its id, and the notes of its misaligned answers (kept once it reads).
  std::string question_id;
  std::vector<std::string> pending;
  std::unordered_set<std::string> ids;  // of the questions read so far

  // The answers list obj[key] (obj at `path`), checked against the context.
  std::vector<SquadAnswer> answers(const json& obj, JsonPath& path, const char* key, const Context& ctx,
                                   int64_t& misaligned) {
    const json& list = list_at(obj, path, key);
    Step sk(path, key);
    std::vector<SquadAnswer> out;
    out.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      Step si(path, static_cast<int64_t>(i));
      const json& a = list[i];
      SquadAnswer ans;
      ans.text = string_at(a, path, "text");
      const json& start = member(a, path, "answer_start");
      Step ss(path, "answer_start");
      if (!start.is_number_integer())
        bad_json(path, fmt::format("is {}, not an integer", json_excerpt(start)));
      if (start.is_number_unsigned() ? start.get<uint64_t>() > static_cast<uint64_t>(ctx.code_points())
                                     : start.get<int64_t>() > ctx.code_points())
        bad_json(path, fmt::format("{} is beyond the context ({} code points)", json_excerpt(start),
                                   ctx.code_points()));
      ans.char_start = start.get<int64_t>();
      if (ans.char_start < 0) bad_json(path, fmt::format("{} is negative", ans.char_start));
      const size_t b = ctx.byte_of[static_cast<size_t>(ans.char_start)];
      if (ctx.text.compare(b, ans.text.size(), ans.text) != 0) {
        ++misaligned;
        if (pending.size() < 10)
          pending.push_back(
              fmt::format("{}: question {}: {} {} is not at answer_start {} (the context there reads {})",
                          file, question_id, key, json_excerpt(json(ans.text)), ans.char_start,
                          json_excerpt(json(ctx.text.substr(b, std::max<size_t>(ans.text.size(), 1))))));
      }
      out.push_back(std::move(ans));
    }
    return out;
  }

  // One question; throws BadJson.
  SquadExample question(const json& qa, JsonPath& path, const std::string& title, const Context& ctx,
                        int64_t& misaligned) {
    SquadExample ex;
    ex.id = string_at(qa, path, "id");
    question_id = ex.id;
    ex.question = string_at(qa, path, "question");
    ex.title = title;
    ex.context = ctx.text;
    if (const auto it = qa.find("is_impossible"); it != qa.end()) {
      saw_is_impossible = true;
      Step s(path, "is_impossible");
      if (!it->is_boolean()) bad_json(path, fmt::format("is {}, not true or false", it->dump()));
      ex.is_impossible = it->get<bool>();
    }
    ex.answers = answers(qa, path, "answers", ctx, misaligned);
    if (qa.contains("plausible_answers"))
      ex.plausible_answers = answers(qa, path, "plausible_answers", ctx, misaligned);
    if (ex.is_impossible && !ex.answers.empty())
      bad_json(path, fmt::format("is_impossible, yet has {} answers", ex.answers.size()));
    if (!ex.is_impossible && ex.answers.empty()) bad_json(path, "has no answers and is not is_impossible");
    // The evaluation scores each question by its id (evaluate-v2.0.py keys a dict by it): a
    // repeated id is refused here, before any training, not at the first evaluation.
    if (!ids.insert(ex.id).second) {
      Step s(path, "id");
      bad_json(path, fmt::format("question id {} appears twice in the file", json_excerpt(json(ex.id))));
    }
    return ex;
  }

  // "FILE:LINE:COL: PATH: what" for a bad value of the article at bytes [begin, end) of the file.
  std::string message(const BadJson& b, size_t begin, size_t end) const {
    const JsonPath in_article(b.path.begin() + 2, b.path.end());  // past data[i]
    return json_at(file, text, std::string_view(text).substr(begin, end - begin), begin, b.path, in_article,
                   b.what);
  }

  // One element of "data", at bytes [begin, end) of the file.
  void article(const json& art, int64_t index, size_t begin, size_t end) {
    JsonPath path{{"data", -1}, {"", index}};
    try {
      std::string title;
      if (const auto it = art.find("title"); it != art.end()) title = string_at(art, path, "title");
      const json& paragraphs = list_at(art, path, "paragraphs");
      Step sp(path, "paragraphs");
      for (size_t p = 0; p < paragraphs.size(); ++p) {
        Step spi(path, static_cast<int64_t>(p));
        const json& par = paragraphs[p];
        const Context ctx(string_at(par, path, "context"));
        const json& qas = list_at(par, path, "qas");
        Step sq(path, "qas");
        for (size_t q = 0; q < qas.size(); ++q) {
          Step sqi(path, static_cast<int64_t>(q));
          int64_t misaligned = 0;
          try {
            pending.clear();
            ds.examples.push_back(question(qas[q], path, title, ctx, misaligned));
            ds.misaligned += misaligned;
            for (std::string& n : pending)
              if (ds.misaligned_at.size() < 10) ds.misaligned_at.push_back(std::move(n));
          } catch (const BadJson& b) {
            if (!opt.skip_bad_rows) throw;
            ++ds.stats.skipped;  // (the Steps below qas[q] are gone with the stack)
            if (ds.stats.skipped_at.size() < 10) ds.stats.skipped_at.push_back(message(b, begin, end));
          }
        }
      }
    } catch (const BadJson& b) {
      throw Error("[benchmarks] " + message(b, begin, end));
    }
  }
};

std::string normalized_version(std::string v) {
  if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v.erase(0, 1);
  return v;
}

}  // namespace

SquadDataset read_squad(const std::string& path, const ReadOptions& opt) {
  if (!names_a_file(path))
    fail("benchmarks", "{}: no such file (SQuAD: train-v1.1.json, dev-v2.0.json, ...)", path);
  const std::string text = read_file(path);
  if (const std::string e = utf8_error(path, text); !e.empty()) throw Error("[benchmarks] " + e);

  SquadDataset ds;
  Reader r{path, text, opt, ds, false, {}, {}};
  const char* read = text.data();  // how far the parser has read (ReadCursor)
  std::string top_key;             // the member of the top-level object being parsed
  bool in_data = false;            // inside the "data" list
  int64_t index = 0;               // of the next article
  size_t begin = 0;                // of the current article
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
    using E = json::parse_event_t;
    const size_t at = static_cast<size_t>(read - text.data());
    if (depth == 1) {
      if (ev == E::key) top_key = parsed.get<std::string>();
      if (ev == E::array_start) in_data = top_key == "data";
      if (ev == E::array_end) in_data = false;
      return true;
    }
    if (depth != 2 || !in_data) return true;
    if (ev == E::object_start) begin = at - 1;  // the lexer has just read the '{'
    if (ev == E::object_end) {
      r.article(parsed, index++, begin, at);
      return false;  // dropped from the tree
    }
    if (ev == E::value || ev == E::array_end)
      throw Error("[benchmarks] " + json_at(path, text, {{"data", -1}, {"", index}},
                                            fmt::format("is {}, not an object", json_kind(parsed))));
    return true;
  };
  json root;
  check_json_depth(text, path, "benchmarks");
  try {
    root =
        json::parse(ReadCursor(text.data(), &read), ReadCursor(text.data() + text.size(), &read), on_event);
  } catch (const json::parse_error& e) {
    throw Error("[benchmarks] " + json_syntax_error(path, text, e));
  } catch (const json::out_of_range& e) {  // a number beyond a double's range (406)
    throw Error(fmt::format("[benchmarks] {}: not valid JSON: {}", path, e.what()));
  }

  const auto reject = [&](const JsonPath& p, const std::string& what) {
    throw Error("[benchmarks] " + json_at(path, text, p, what));
  };
  if (!root.is_object())
    reject({}, fmt::format("the top level is {}, not an object (not a SQuAD file)", json_kind(root)));
  const auto data = root.find("data");
  if (data == root.end()) reject({}, "no \"data\" (not a SQuAD file)");
  if (!data->is_array()) reject({{"data", -1}}, fmt::format("is {}, not a list", json_kind(*data)));
  if (const auto it = root.find("version"); it != root.end()) {
    if (!it->is_string()) reject({{"version", -1}}, fmt::format("is {}, not a string", json_kind(*it)));
    ds.version = normalized_version(it->get<std::string>());
  } else {
    ds.version = r.saw_is_impossible ? "2.0" : "1.1";
  }
  ds.stats.rows = static_cast<int64_t>(ds.examples.size());
  return ds;
}

std::string squad_file(const std::string& path_or_dir, const std::string& version, const std::string& split) {
  std::error_code ec;
  if (names_a_file(path_or_dir)) return path_or_dir;
  if (!fs::is_directory(path_or_dir, ec))
    fail("benchmarks", "{}: no such file or folder (SQuAD)", path_or_dir);
  const std::string v = normalized_version(version);
  if (v != "1.1" && v != "2.0") fail("benchmarks", "unknown SQuAD version \"{}\" (1.1 or 2.0)", version);
  if (split != "train" && split != "dev")
    fail("benchmarks", "unknown SQuAD split \"{}\" (train or dev)", split);
  const std::string file = (fs::path(path_or_dir) / fmt::format("{}-v{}.json", split, v)).string();
  if (!names_a_file(file))
    fail("benchmarks", "{}: no {}-v{}.json there (the official SQuAD file name)", path_or_dir, split, v);
  return file;
}

}  // namespace saobp::bench
