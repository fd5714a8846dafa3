#include <catch2/catch.hpp>
#include <cmath>

#include "attention/metrics.h"

using namespace saobp;

TEST_CASE("metrics: attention entropy of uniform, one-hot and padded matrices", "[attention][metrics]") {
  const int64_t T = 4;
  // Head 0 uniform over all 4 keys (H = log 4), head 1 one-hot (H = 0).
  std::vector<double> p(static_cast<size_t>(2 * T * T), 0.0);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j < T; ++j) p[static_cast<size_t>(i * T + j)] = 0.25;
    p[static_cast<size_t>(T * T + i * T + (i + 1) % T)] = 1.0;
  }
  const Tensor probs = Tensor::from_vector(p, {1, 2, T, T});
  const std::vector<double> h = attention_entropy(probs);
  CHECK(h[0] == Approx(std::log(4.0)).epsilon(1e-15));
  CHECK(h[1] == 0.0);
  CHECK(mean_attention_entropy(probs) == Approx(std::log(4.0) / 2));

  // Causal-uniform rows: row i spreads over i + 1 keys, H = mean_i log(i + 1); the padded last
  // row is excluded from the mean.
  std::vector<double> c(static_cast<size_t>(T * T), 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) c[static_cast<size_t>(i * T + j)] = 1.0 / static_cast<double>(i + 1);
  const Tensor mask = Tensor::from_vector(std::vector<uint8_t>{1, 1, 1, 0}, {1, T});
  const double want = (std::log(1.0) + std::log(2.0) + std::log(3.0)) / 3;
  CHECK(attention_entropy(Tensor::from_vector(c, {1, 1, T, T}), mask)[0] == Approx(want).epsilon(1e-15));
  CHECK_THROWS_WITH(attention_entropy(Tensor::zeros({1, 1, 3, 4})), Catch::Contains("(B,NH,T,T)"));
}
