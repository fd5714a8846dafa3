// The statistics of seed studies, correlations and benches, in one place: mean, median, sample
// standard deviation, the paired difference of two conditions with its 95% Student-t interval, Pearson's
// r with its two-sided p-value, Spearman's rho (average ranks for ties). The t quantiles and CDF
// come from Boost.Math (boost/math/distributions/students_t.hpp). Each formula is written above
// its code in stats.cpp; scipy's names are given where the result matches it.
#pragma once
#include <cstddef>
#include <vector>

namespace saobp::stats {

// Arithmetic mean; throws Error("[stats] ...") on no values.
double mean(const std::vector<double>& x);
// Sample standard deviation (divisor n - 1); NaN for a single value; throws on no values.
double sample_sd(const std::vector<double>& x);
// The middle value of the sorted values, or the mean of the two middle ones when n is even
// (numpy.median); throws on no values. The benches report it over their timed iterations.
double median(std::vector<double> x);

// The q-quantile of Student's t with `df` degrees of freedom (df > 0, 0 < q < 1).
double t_quantile(double df, double q);

// a - b, pair by pair (the same seed under two conditions): n pairs, the mean and sample
// standard deviation of the differences, the 95% t interval mean -+ t(0.975, n-1) sd / sqrt(n),
// the t statistic and its two-sided p-value. n >= 2 (else throws); sd == 0 gives a zero-width
// interval, t = +-inf (p = 0) or NaN (p = NaN) when the mean is 0 too.
struct PairedDifference {
  size_t n = 0;
  double mean = 0, sd = 0, lo = 0, hi = 0, t = 0, p = 0;
};
PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b);

// scipy.stats.pearsonr's r (n >= 2; NaN when x or y is constant; n == 2 gives +-1).
double pearson(const std::vector<double>& x, const std::vector<double>& y);
// The two-sided p-value of r over n pairs: t = r sqrt((n-2)/(1-r^2)) with n-2 degrees of freedom
// (scipy.stats.pearsonr's); 1 when n == 2, 0 when |r| == 1 and n > 2, NaN when r is.
double pearson_p(double r, size_t n);
// scipy.stats.rankdata(method="average"): 1-based ranks, ties get the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& x);
// scipy.stats.spearmanr's rho: Pearson's r of the average ranks (NaN when constant or n < 2).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// Both correlations of y on x, with the least-squares line y = slope x + intercept (for a plot).
struct Correlation {
  size_t n = 0;
  double pearson_r = 0, pearson_p = 0, spearman_rho = 0, slope = 0, intercept = 0;
};
// Throws naming the sizes when x and y differ in length or have fewer than 2 values.
Correlation correlate(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace saobp::stats
