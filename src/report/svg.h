// Inline-SVG chart primitives for `saobp report`: a line chart, a grouped bar chart and a heatmap,
// each returned as one self-contained <svg> element (no script, no external resource). Every
// string that reaches the markup goes through escape(); non-finite values are skipped (a NaN
// breaks a line, it never stretches an axis).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace saobp::svg {

// &, <, >, " and ' as entities; other control characters (< 0x20 except tab) as U+FFFD.
std::string escape(std::string_view s);

// The i-th color of a 10-color categorical palette (Tableau 10), cycling.
std::string palette(size_t i);

// Axis range of the finite values in `v` (NaN and inf skipped). `found` is false when there is
// none; then lo = 0, hi = 1. A constant series gets a non-empty range around its value.
struct Range {
  double lo = 0, hi = 1;
  bool found = false;
};
Range finite_range(const std::vector<double>& v);
Range merge(Range a, Range b);

// Round ("nice") tick values covering [lo, hi] with about `target` intervals: steps 1, 2, 5 x 10^k.
// The first tick is <= lo and the last >= hi. lo == hi is widened first.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// A tick label: fixed notation with as many decimals as the step needs, scientific when tiny/huge.
std::string tick_label(double v, double step);

struct Series {
  std::string name;
  std::string color;
  std::vector<double> x, y;  // same length; a pair with a non-finite coordinate is a gap
  bool dashed = false;
  bool markers = false;  // a dot on every point, its values as a tooltip (isolated points always get a dot)
  bool line = true;      // false: the points only (a scatter), no polyline
};

// A dotted vertical line across the plot area at x (an epoch end), `label` at its top in `color`.
struct XMark {
  double x = 0;
  std::string label, color;
};

struct LineChart {
  std::string id, title, xlabel, ylabel;
  std::vector<Series> series;
  int width = 420, height = 270;                           // of the plot area plus margins, legend excluded
  bool integer_x = false;                                  // x ticks on integers only (layers)
  double ymin = std::numeric_limits<double>::quiet_NaN();  // fixed y-axis ends when finite (rates: 0, 1)
  double ymax = std::numeric_limits<double>::quiet_NaN();
  bool legend = true;
  std::vector<XMark> marks = {};  // drawn when x lies on the axis; labels at one x are stacked
};
// The chart as <svg id=...>; with no finite point at all, the axes and a "no data" note.
std::string line_chart(const LineChart& c);

// A scatter of (x, y) points with the least-squares line y = slope x + intercept drawn dashed
// across the points' x range (not drawn when slope or intercept is not finite); the title
// carries the statistics (Pearson r, p, Spearman rho) the caller formats.
struct Scatter {
  std::string id, title, xlabel, ylabel, color = "#4e79a7";
  std::vector<double> x, y;
  double slope = std::numeric_limits<double>::quiet_NaN(),
         intercept = std::numeric_limits<double>::quiet_NaN();
};
std::string scatter_chart(const Scatter& s);

struct BarSeries {
  std::string name, color;
  std::vector<double> values;  // one per category; non-finite = no bar
};
struct BarChart {
  std::string id, title, xlabel, ylabel;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;  // one bar per series in every category group
  int width = 420, height = 270;
};
std::string bar_chart(const BarChart& c);

// Sequential color map (viridis-like), t in [0, 1] clamped; non-finite gives light gray.
std::string color_map(double t);

struct Heatmap {
  std::string id, title;
  int64_t rows = 0, cols = 0;
  std::vector<double> values;                       // rows x cols, row-major (row = query, column = key)
  std::vector<std::string> row_labels, col_labels;  // drawn when non-empty (size rows / cols)
  double vmin = 0, vmax = 1;                        // the color scale
  std::string xlabel = "key", ylabel = "query";
  int cell = 8;  // pixels per cell
};
// A rect grid with a color-scale legend on the right.
std::string heatmap(const Heatmap& h);

}  // namespace saobp::svg
