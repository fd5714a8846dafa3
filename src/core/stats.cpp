// The statistics of src/core/stats.h.
//
// mean: sum x_i / n.  sample_sd: sqrt(sum (x_i - mean)^2 / (n - 1)).
//
// paired_difference: d_i = a_i - b_i; mean d, sd = sample_sd(d), se = sd / sqrt(n),
//   q = t_quantile(n - 1, 0.975), interval [mean - q se, mean + q se], t = mean / se,
//   p = 2 (1 - F_{n-1}(|t|)) with F the t CDF (scipy.stats.ttest_rel's statistic and p-value).
//
// pearson (scipy.stats.pearsonr): n >= 2 (else throws, as scipy raises); NaN when x or y is
//   constant (scipy warns ConstantInputWarning and returns nan); n == 2: sign(x1-x0) sign(y1-y0);
//   otherwise xm = x - mean(x), ym = y - mean(y), each scaled by its max |.| (scipy's overflow
//   guard), r = <xm/|xm|, ym/|ym|>, clipped to [-1, 1].
//
// spearman (scipy.stats.spearmanr, 1-D): the average ranks of x and of y (average_ranks), then
//   numpy's corrcoef of the two rank vectors: cov(a,b)/(n-1) / sqrt(var a) / sqrt(var b), clipped
//   to [-1, 1]. NaN when x or y is constant or n == 1 (as scipy).
//
// average_ranks (scipy.stats.rankdata, method="average"): 1-based ranks of the sorted order; a run
//   of equal values occupying sorted positions i+1..j gets (i+1+j)/2. Any NaN makes every rank
//   NaN (rankdata's nan_policy="propagate").
//
// pearson_p: t = r sqrt((n - 2) / (1 - r^2)), p = 2 (1 - F_{n-2}(|t|)) (scipy's pearsonr computes
//   the same value through the beta distribution of r).
//
// correlate: slope = sum (x-mx)(y-my) / sum (x-mx)^2, intercept = my - slope mx (NaN slope when x
//   is constant).
#include "core/stats.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace saobp::stats {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double corrcoef(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(n), mb /= static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    const double da = a[i] - ma, db = b[i] - mb;
    sab += da * db, saa += da * da, sbb += db * db;
  }
  const double f = static_cast<double>(n - 1);
  const double r = sab / f / std::sqrt(saa / f) / std::sqrt(sbb / f);
  return std::clamp(r, -1.0, 1.0);
}

bool constant(const std::vector<double>& x) {
  return std::all_of(x.begin(), x.end(), [&](double v) { return v == x[0]; });
}
// 2 (1 - F_df(|t|)), the two-sided tail of Student's t.
double two_sided_p(double t, double df) {
  if (std::isnan(t)) return kNaN;
  if (std::isinf(t)) return 0.0;
  const boost::math::students_t dist(df);
  return 2.0 * boost::math::cdf(boost::math::complement(dist, std::abs(t)));
}

}  // namespace

double mean(const std::vector<double>& x) {
  SAOBP_CHECK(!x.empty(), "stats", "mean: no values");
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

// Sorted x_(1) <= ... <= x_(n): x_((n+1)/2) for odd n, (x_(n/2) + x_(n/2+1)) / 2 for even n.
double median(std::vector<double> x) {
  SAOBP_CHECK(!x.empty(), "stats", "median: no values");
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double sample_sd(const std::vector<double>& x) {
  const double m = mean(x);
  if (x.size() < 2) return kNaN;
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

double t_quantile(double df, double q) {
  SAOBP_CHECK(df > 0 && q > 0 && q < 1, "stats", "t_quantile: needs df > 0 and 0 < q < 1, got df {} q {}", df,
              q);
  return boost::math::quantile(boost::math::students_t(df), q);
}

PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  SAOBP_CHECK(a.size() == b.size(), "stats", "paired_difference: {} values against {}", a.size(), b.size());
  SAOBP_CHECK(a.size() >= 2, "stats", "paired_difference: needs at least 2 pairs, got {}", a.size());
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  PairedDifference r;
  r.n = d.size();
  r.mean = mean(d);
  r.sd = sample_sd(d);
  const double df = static_cast<double>(r.n - 1);
  const double se = r.sd / std::sqrt(static_cast<double>(r.n));
  const double q = t_quantile(df, 0.975);
  r.lo = r.mean - q * se;
  r.hi = r.mean + q * se;
  r.t = se > 0 ? r.mean / se : (r.mean == 0 ? kNaN : std::copysign(INFINITY, r.mean));
  r.p = two_sided_p(r.t, df);
  return r;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  SAOBP_CHECK(x.size() == y.size(), "stats", "pearson: {} x values against {} y values", x.size(), y.size());
  const size_t n = x.size();
  SAOBP_CHECK(n >= 2, "stats", "pearson: needs at least 2 values, got {}", n);
  if (constant(x) || constant(y)) return kNaN;
  if (n == 2) {
    const auto sign = [](double v) { return static_cast<double>((v > 0) - (v < 0)); };
    return sign(x[1] - x[0]) * sign(y[1] - y[0]);
  }
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n), my /= static_cast<double>(n);
  std::vector<double> xm(n), ym(n);
  double xmax = 0, ymax = 0;
  for (size_t i = 0; i < n; ++i) {
    xm[i] = x[i] - mx, ym[i] = y[i] - my;
    xmax = std::max(xmax, std::abs(xm[i])), ymax = std::max(ymax, std::abs(ym[i]));
  }
  double nx = 0, ny = 0;
  for (size_t i = 0; i < n; ++i) {
    xm[i] /= xmax, ym[i] /= ymax;
    nx += xm[i] * xm[i], ny += ym[i] * ym[i];
  }
  nx = std::sqrt(nx), ny = std::sqrt(ny);
  double r = 0;
  for (size_t i = 0; i < n; ++i) r += (xm[i] / nx) * (ym[i] / ny);
  return std::clamp(r, -1.0, 1.0);
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  SAOBP_CHECK(!x.empty(), "stats", "average_ranks: no values");
  const size_t n = x.size();
  if (std::any_of(x.begin(), x.end(), [](double v) { return std::isnan(v); }))
    return std::vector<double>(n, kNaN);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(n);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && x[order[j]] == x[order[i]]) ++j;
    // Sorted positions i..j-1 hold ranks i+1..j: their mean is (i + 1 + j) / 2.
    const double r = static_cast<double>(i + 1 + j) / 2.0;
    for (size_t k = i; k < j; ++k) rank[order[k]] = r;
    i = j;
  }
  return rank;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  SAOBP_CHECK(x.size() == y.size(), "stats", "spearman: {} x values against {} y values", x.size(), y.size());
  if (x.size() < 2 || constant(x) || constant(y)) return kNaN;
  return corrcoef(average_ranks(x), average_ranks(y));
}
double pearson_p(double r, size_t n) {
  SAOBP_CHECK(n >= 2, "stats", "pearson_p: needs at least 2 pairs, got {}", n);
  if (std::isnan(r)) return kNaN;
  if (n == 2) return 1.0;
  if (std::abs(r) >= 1.0) return 0.0;
  const double df = static_cast<double>(n - 2);
  return two_sided_p(r * std::sqrt(df / (1.0 - r * r)), df);
}

Correlation correlate(const std::vector<double>& x, const std::vector<double>& y) {
  SAOBP_CHECK(x.size() == y.size(), "stats", "correlate: {} x values against {} y values", x.size(),
              y.size());
  SAOBP_CHECK(x.size() >= 2, "stats", "correlate: needs at least 2 points, got {}", x.size());
  Correlation c;
  c.n = x.size();
  c.pearson_r = pearson(x, y);
  c.pearson_p = pearson_p(c.pearson_r, c.n);
  c.spearman_rho = spearman(x, y);
  const double mx = mean(x), my = mean(y);
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < c.n; ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  c.slope = sxx > 0 ? sxy / sxx : kNaN;
  c.intercept = my - c.slope * mx;
  return c;
}

}  // namespace saobp::stats
