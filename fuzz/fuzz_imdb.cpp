// IMDb (src/data/benchmarks/text_tasks.cpp). Selector byte: bit 0 skip_bad_rows; then up to
// eight '\0'-separated reviews, each "NAME\nTEXT", alternately in train/neg/ and train/pos/
// (NAME keeps only [A-Za-z0-9_.] and at most 40 bytes, so it stays one plain file name).
#include <algorithm>
#include <cctype>

#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace saobp;
  fuzz::BenchInput in(data, size);
  fuzz::fs::create_directories(in.dir / "train" / "neg");
  fuzz::fs::create_directories(in.dir / "train" / "pos");
  for (int i = 0; i < 8 && !in.empty(); ++i) {
    const std::string_view review = in.part(i == 7);
    const size_t nl = std::min(review.find('\n'), review.size());
    std::string name;
    for (char c : review.substr(0, std::min<size_t>(nl, 40)))
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') name += c;
    if (name.empty() || name == "." || name == "..") name = "0_1.txt";
    fuzz::put(in.dir / "train" / (i % 2 ? "pos" : "neg"), name,
              review.substr(std::min(nl + 1, review.size())));
  }
  fuzz::check([&] { (void)bench::read_imdb(in.dir.string(), "train", in.opt); });
  return 0;
}
