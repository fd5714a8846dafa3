// The corpus readers (src/data/corpus.h). Selector byte: bits 0-1 the kind (text, fortune,
// wikitext, jsonl); bit 2 clear: the rest is one file; set: up to four '\0'-separated parts are
// the files of a folder.
#include "data/corpus.h"
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::Input in(data, size);
  const uint8_t sel = in.selector();
  static const char* kinds[] = {"text", "fortune", "wikitext", "jsonl"};
  const auto dir = fuzz::fresh_case();
  CorpusSpec spec;
  spec.kind = kinds[sel & 3];
  if (sel & 4) {
    for (int i = 0; i < 4 && !in.empty(); ++i) fuzz::put(dir / "c", "f" + std::to_string(i), in.part(i == 3));
    spec.path = (dir / "c").string();
  } else {
    spec.path = fuzz::put(dir, "corpus.txt", in.part(true));
  }
  fuzz::check([&] {
    size_t bytes = 0;
    for_each_document(spec, [&](const Document& d) {
      for (const std::string& l : d.lines) bytes += l.size();
    });
    (void)corpus_fingerprint(spec);
  });
  return 0;
}
