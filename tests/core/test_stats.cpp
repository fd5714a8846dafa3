// src/core/stats.h against values worked out by hand in the comment beside each check. The t
// distribution has closed forms for 1 and 2 degrees of freedom, which the hand values use:
//   df = 1 (Cauchy): F(t) = 1/2 + atan(t)/pi, quantile(q) = tan(pi (q - 1/2));
//   df = 2:          F(t) = 1/2 + t / (2 sqrt(2 + t^2)), quantile(q): t^2 = 2u^2/(1-u^2), u = 2q-1.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"
#include "core/stats.h"

using namespace saobp;
using Catch::Matchers::Contains;

namespace {
Approx near(double v) { return Approx(v).epsilon(1e-12).margin(1e-14); }
}  // namespace

TEST_CASE("stats: mean and sample standard deviation", "[stats]") {
  // {1,2,3,4}: mean 10/4 = 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, / (n-1) = 5/3,
  // sd = sqrt(5/3) = 1.2909944487358056.
  CHECK(stats::mean({1, 2, 3, 4}) == 2.5);
  CHECK(stats::sample_sd({1, 2, 3, 4}) == near(std::sqrt(5.0 / 3.0)));
  CHECK(stats::sample_sd({1, 3}) == near(std::sqrt(2.0)));  // n = 2: deviations -1, 1: sqrt(2/1)
  CHECK(std::isnan(stats::sample_sd({7})));
  CHECK_THROWS_WITH(stats::mean({}), Contains("[stats]") && Contains("no values"));
}

TEST_CASE("stats: median of odd and even counts, in any order", "[stats]") {
  CHECK(stats::median({7}) == 7);
  CHECK(stats::median({3, 1, 2}) == 2);       // sorted 1 2 3: the middle one
  CHECK(stats::median({4, 1, 3, 2}) == 2.5);  // sorted 1 2 3 4: (2 + 3) / 2
  CHECK(stats::median({5, 5, 1, 9}) == 5);    // sorted 1 5 5 9: (5 + 5) / 2
  CHECK_THROWS_WITH(stats::median({}), Contains("[stats]") && Contains("no values"));
}

TEST_CASE("stats: Student t quantiles from Boost.Math match the closed forms", "[stats]") {
  // df = 1: tan(0.475 pi) = 12.706204736174696; df = 2: u = 0.95, t^2 = 2 (0.9025)/0.0975 =
  // 18.512820512820513, t = 4.302652729749464.
  CHECK(stats::t_quantile(1, 0.975) == near(12.706204736174696));
  CHECK(stats::t_quantile(2, 0.975) == near(4.302652729749464));
  CHECK_THROWS_WITH(stats::t_quantile(0, 0.5), Contains("[stats]") && Contains("df > 0"));
}

TEST_CASE("stats: the paired difference and its 95% t interval", "[stats]") {
  {
    // n = 2: a = {3,5}, b = {2,2}: d = {1,3}, mean 2, sd sqrt((1+1)/1) = sqrt 2, se = sqrt2/sqrt2 = 1,
    // q = t(0.975, 1) = 12.706204736174696: interval 2 -+ 12.706..., t = 2 / 1 = 2,
    // p = 2 (1 - F_1(2)) = 1 - 2 atan(2)/pi = 0.2951672353008665.
    const stats::PairedDifference d = stats::paired_difference({3, 5}, {2, 2});
    CHECK(d.n == 2);
    CHECK(d.mean == near(2));
    CHECK(d.sd == near(std::sqrt(2.0)));
    CHECK(d.lo == near(2 - 12.706204736174696));
    CHECK(d.hi == near(2 + 12.706204736174696));
    CHECK(d.t == near(2));
    CHECK(d.p == near(0.2951672353008665));
  }
  {
    // n = 3: a = {2,3,8}, b = {1,1,2}: d = {1,2,6}, mean 3, deviations -2 -1 3, squares 14, / 2 = 7,
    // sd = sqrt 7, se = sqrt(7/3) = 1.5275252316519468, q = t(0.975, 2) = 4.302652729749464:
    // interval 3 -+ 6.572410607728431 = [-3.5724106077284308, 9.57241060772843]; t = 3 / se =
    // 1.9639610121239313; p = 1 - t / sqrt(2 + t^2) = 0.18849732879931091.
    const stats::PairedDifference d = stats::paired_difference({2, 3, 8}, {1, 1, 2});
    CHECK(d.mean == near(3));
    CHECK(d.sd == near(std::sqrt(7.0)));
    CHECK(d.lo == near(-3.5724106077284308));
    CHECK(d.hi == near(9.57241060772843));
    CHECK(d.t == near(1.9639610121239313));
    CHECK(d.p == near(0.18849732879931091));
  }
  {
    // Equal differences {1,1}: sd 0, a zero-width interval at 1, t = +inf, p = 0.
    const stats::PairedDifference d = stats::paired_difference({2, 3}, {1, 2});
    CHECK(d.lo == 1);
    CHECK(d.hi == 1);
    CHECK(std::isinf(d.t));
    CHECK(d.p == 0);
  }
  CHECK_THROWS_WITH(stats::paired_difference({1}, {2}), Contains("[stats]") && Contains("at least 2 pairs"));
  CHECK_THROWS_WITH(stats::paired_difference({1, 2}, {2}),
                    Contains("[stats]") && Contains("2 values against 1"));
}

TEST_CASE("stats: Pearson r with its p-value, Spearman with ties, the fitted line", "[stats]") {
  // x = {1,2,3,4}, y = {1,3,2,4}: centered x -1.5 -.5 .5 1.5, y -1.5 .5 -.5 1.5; sum xy = 2.25 -
  // .25 - .25 + 2.25 = 4, sum xx = sum yy = 5: r = 4/5 = 0.8. df = 2, t = 0.8 sqrt(2/0.36) =
  // 1.8856180831641267, p = 1 - t/sqrt(2+t^2) = 1 - 1.8856.../2.3570226... = 1 - 0.8 = 0.2.
  // Ranks equal the values, so rho = 0.8 too. Line: slope 4/5 = 0.8, intercept 2.5 - 0.8 2.5 = 0.5.
  const stats::Correlation c = stats::correlate({1, 2, 3, 4}, {1, 3, 2, 4});
  CHECK(c.n == 4);
  CHECK(c.pearson_r == near(0.8));
  CHECK(c.pearson_p == near(0.2));
  CHECK(c.spearman_rho == near(0.8));
  CHECK(c.slope == near(0.8));
  CHECK(c.intercept == near(0.5));
  // Ties: x = {1,2,2,3} ranks {1, 2.5, 2.5, 4}, y = {1,2,3,4} ranks {1,2,3,4}: centered ranks x
  // -1.5 0 0 1.5, y -1.5 -.5 .5 1.5: sum 4.5, sum xx 4.5, sum yy 5: rho = 4.5 / sqrt(22.5) =
  // 0.9486832980505138.
  CHECK(stats::average_ranks({1, 2, 2, 3}) == std::vector<double>{1, 2.5, 2.5, 4});
  CHECK(stats::spearman({1, 2, 2, 3}, {1, 2, 3, 4}) == near(0.9486832980505138));
  // n = 2: r is the sign of the slope, and no degree of freedom is left: p = 1.
  const stats::Correlation two = stats::correlate({1, 2}, {5, 3});
  CHECK(two.pearson_r == -1);
  CHECK(two.pearson_p == 1);
  CHECK(two.slope == near(-2));
  // |r| = 1 with n > 2: p = 0; a constant variable: r and p are NaN.
  CHECK(stats::pearson_p(1.0, 5) == 0);
  CHECK(std::isnan(stats::correlate({1, 1, 1}, {1, 2, 3}).pearson_p));
  CHECK_THROWS_WITH(stats::correlate({1}, {1}), Contains("[stats]") && Contains("at least 2 points"));
  CHECK_THROWS_WITH(stats::correlate({1, 2}, {1}), Contains("[stats]") && Contains("2 x values against 1"));
}
