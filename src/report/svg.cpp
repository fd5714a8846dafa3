#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace saobp::svg {

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t')
          out += "\xEF\xBF\xBD";  // U+FFFD: control characters are not allowed in the markup
        else
          out += ch;
    }
  }
  return out;
}

std::string palette(size_t i) {
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colors[i % 10];
}

Range finite_range(const std::vector<double>& v) {
  Range r;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    if (!r.found) {
      r.lo = r.hi = x;
      r.found = true;
    } else {
      r.lo = std::min(r.lo, x);
      r.hi = std::max(r.hi, x);
    }
  }
  return r;
}

Range merge(Range a, Range b) {
  if (!a.found) return b;
  if (!b.found) return a;
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi), true};
}

namespace {

// Widens an empty interval: around v by 10% of |v| (0.5 when v = 0).
void widen(double& lo, double& hi) {
  if (hi > lo) return;
  const double d = lo == 0 ? 0.5 : std::abs(lo) * 0.1;
  lo -= d;
  hi += d;
}

double nice_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

std::string num(double v) { return fmt::format("{:.1f}", v); }

// Estimated width in pixels of `s` at `font` px (sans-serif, average glyph ~0.6 em).
double text_width(std::string_view s, double font) {
  int64_t glyphs = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++glyphs;
  return 0.6 * font * static_cast<double>(glyphs);
}

// At most n code points of UTF-8 `s`, with "…" when cut.
std::string truncate_utf8(const std::string& s, int64_t n) {
  int64_t glyphs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (glyphs == n) return s.substr(0, i) + "\xE2\x80\xA6";
      ++glyphs;
    }
  }
  return s;
}

struct Frame {
  double left = 64, right = 14, top = 32, bottom = 46;
  double width = 0, height = 0;  // of the whole chart (legend excluded)
  double pw() const { return width - left - right; }
  double ph() const { return height - top - bottom; }
};

std::string svg_open(const std::string& id, double w, double h) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" class=\"chart\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n",
      escape(id), num(w), num(h), num(w), num(h));
}

std::string title_and_labels(const Frame& f, const std::string& title, const std::string& xlabel,
                             const std::string& ylabel) {
  std::string s;
  s += fmt::format(
      "<text class=\"title\" x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" "
      "font-weight=\"bold\">{}</text>\n",
      num(f.width / 2), escape(title));
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(f.left + f.pw() / 2),
                   num(f.height - 8), escape(xlabel));
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>\n",
      num(f.top + f.ph() / 2), num(f.top + f.ph() / 2), escape(ylabel));
  return s;
}

struct LegendEntry {
  std::string name, color;
  bool dashed = false;
  bool bar = false;
};

// Entries in rows below the chart, wrapped at `width`; returns the markup and adds its height.
std::string legend(const std::vector<LegendEntry>& entries, double width, double y0, double& height) {
  std::string s;
  double x = 10, y = y0 + 12;
  int rows = entries.empty() ? 0 : 1;
  for (const LegendEntry& e : entries) {
    const double w = 28 + text_width(e.name, 11) + 14;
    if (x > 10 && x + w > width - 6) {
      x = 10;
      y += 16;
      ++rows;
    }
    if (e.bar)
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"20\" height=\"9\" fill=\"{}\"/>", num(x), num(y - 8),
                       e.color);
    else
      s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
                       num(x), num(y - 4), num(x + 20), num(y - 4), e.color,
                       e.dashed ? " stroke-dasharray=\"5 3\"" : "");
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", num(x + 25), num(y), escape(e.name));
    x += w;
  }
  height += rows * 16 + (rows ? 6 : 0);
  return s;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (lo > hi) std::swap(lo, hi);
  widen(lo, hi);
  const double step = nice_step(hi - lo, target);
  const double t0 = std::floor(lo / step + 1e-9) * step;
  const double t1 = std::ceil(hi / step - 1e-9) * step;
  const int64_t n = std::llround((t1 - t0) / step);
  std::vector<double> t;
  for (int64_t i = 0; i <= n; ++i) {
    double v = t0 + static_cast<double>(i) * step;
    if (std::abs(v) < step * 1e-9) v = 0;
    t.push_back(v);
  }
  return t;
}

std::string tick_label(double v, double step) {
  if (v == 0) return "0";
  if (!(step > 0) || step < 1e-3 || std::abs(v) >= 1e6) return fmt::format("{:.3g}", v);
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

namespace {
// The plot area's white box, and a light horizontal grid line with its label at every y tick.
template <class YMap>
std::string plot_area(const Frame& f, const std::vector<double>& yt, YMap Y, double ystep) {
  std::string out =
      fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#888\"/>\n",
                  num(f.left), num(f.top), num(f.pw()), num(f.ph()));
  for (double v : yt) {
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e4e4e4\"/>", num(f.left),
                       num(Y(v)), num(f.left + f.pw()), num(Y(v)));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(f.left - 5),
                       num(Y(v) + 4), escape(tick_label(v, ystep)));
  }
  return out;
}
}  // namespace

std::string line_chart(const LineChart& c) {
  Frame f;
  f.width = c.width;
  f.height = c.height;
  Range xr, yr;
  for (const Series& s : c.series) {
    // Only points with both coordinates finite count for either axis.
    std::vector<double> xs, ys;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) xs.push_back(s.x[i]), ys.push_back(s.y[i]);
    xr = merge(xr, finite_range(xs));
    yr = merge(yr, finite_range(ys));
  }
  std::vector<double> xt,
      yt = nice_ticks(std::isfinite(c.ymin) ? c.ymin : yr.lo, std::isfinite(c.ymax) ? c.ymax : yr.hi, 5);
  double xlo, xhi;
  if (c.integer_x) {
    xlo = std::floor(xr.lo) - 0.25;
    xhi = std::ceil(xr.hi) + 0.25;
    const double step = std::max(1.0, nice_step(std::max(1.0, xhi - xlo), 8));
    for (double v = std::ceil(xr.lo / step) * step; v <= xr.hi + 1e-9; v += step) xt.push_back(v);
    if (xt.empty()) xt.push_back(std::round(xr.lo));
  } else {
    xt = nice_ticks(xr.lo, xr.hi, 6);
    xlo = xt.front();
    xhi = xt.back();
  }
  const double ylo = yt.front(), yhi = yt.back();
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1, xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
  auto X = [&](double x) { return f.left + (x - xlo) / (xhi - xlo) * f.pw(); };
  auto Y = [&](double y) { return f.top + f.ph() - (y - ylo) / (yhi - ylo) * f.ph(); };

  std::vector<LegendEntry> entries;
  if (c.legend)
    for (const Series& s : c.series) entries.push_back({s.name, s.color, s.dashed, false});
  double height = f.height;
  const std::string leg = legend(entries, f.width, f.height, height);

  std::string out = svg_open(c.id, f.width, height);
  out += plot_area(f, yt, Y, ystep);
  for (double v : xt) {
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e4e4e4\"/>", num(X(v)),
                       num(f.top), num(X(v)), num(f.top + f.ph()));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(X(v)),
                       num(f.top + f.ph() + 15),
                       escape(c.integer_x ? fmt::format("{}", std::llround(v)) : tick_label(v, xstep)));
  }
  out += title_and_labels(f, c.title, c.xlabel, c.ylabel);
  if (!xr.found || !yr.found)
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
                       num(f.left + f.pw() / 2), num(f.top + f.ph() / 2));
  std::vector<double> marked;  // the x of every mark drawn so far: labels at one x are stacked
  for (const XMark& m : c.marks) {
    if (!std::isfinite(m.x) || m.x < xlo || m.x > xhi) continue;
    const int64_t below = std::count(marked.begin(), marked.end(), m.x);
    marked.push_back(m.x);
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1\" "
        "stroke-dasharray=\"2 3\"/>",
        num(X(m.x)), num(f.top), num(X(m.x)), num(f.top + f.ph()), m.color);
    const bool right = X(m.x) > f.left + f.pw() - 24;  // near the right edge: the label on the left
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"9\" fill=\"{}\"{}>{}</text>\n",
                       num(X(m.x) + (right ? -2 : 2)), num(f.top + 10 + 10 * static_cast<double>(below)),
                       m.color, right ? " text-anchor=\"end\"" : "", escape(m.label));
  }
  for (const Series& s : c.series) {
    const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
    std::vector<std::pair<double, double>> seg;
    auto flush = [&] {
      if (seg.size() == 1 && !s.markers) {
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", num(seg[0].first),
                           num(seg[0].second), s.color);
      } else if (seg.size() > 1 && s.line) {
        std::string pts;
        for (const auto& [px, py] : seg) pts += num(px) + "," + num(py) + " ";
        out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                           s.color, dash, pts);
      }
      seg.clear();
    };
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        flush();
        continue;
      }
      seg.emplace_back(X(s.x[i]), Y(s.y[i]));
      if (s.markers)
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>",
                           num(X(s.x[i])), num(Y(s.y[i])), s.color,
                           escape(fmt::format("{}: {} {:g}, {:.4g}", s.name, c.xlabel, s.x[i], s.y[i])));
    }
    flush();
  }
  out += leg;
  out += "</svg>\n";
  return out;
}

std::string scatter_chart(const Scatter& s) {
  LineChart c{s.id, s.title, s.xlabel, s.ylabel, {}};
  c.legend = true;
  Series points{"points", s.color, s.x, s.y};
  points.markers = true;
  points.line = false;
  c.series.push_back(points);
  const Range xr = finite_range(s.x);
  if (xr.found && std::isfinite(s.slope) && std::isfinite(s.intercept))
    c.series.push_back({"least-squares line",
                        "#e15759",
                        {xr.lo, xr.hi},
                        {s.slope * xr.lo + s.intercept, s.slope * xr.hi + s.intercept},
                        true});
  return line_chart(c);
}

std::string bar_chart(const BarChart& c) {
  Frame f;
  f.width = c.width;
  f.height = c.height;
  Range yr;
  for (const BarSeries& s : c.series) yr = merge(yr, finite_range(s.values));
  // Headroom of 8% above the tallest bar for its value label.
  const double lo = std::min(0.0, yr.found ? yr.lo : 0.0), hi = std::max(0.0, yr.found ? yr.hi : 1.0);
  const std::vector<double> yt = nice_ticks(lo, hi + 0.08 * (hi - lo), 5);
  const double ylo = yt.front(), yhi = yt.back(), ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  auto Y = [&](double y) { return f.top + f.ph() - (y - ylo) / (yhi - ylo) * f.ph(); };

  std::vector<LegendEntry> entries;
  for (const BarSeries& s : c.series) entries.push_back({s.name, s.color, false, true});
  double height = f.height;
  const std::string leg = legend(entries, f.width, f.height, height);

  std::string out = svg_open(c.id, f.width, height);
  out += plot_area(f, yt, Y, ystep);
  out += title_and_labels(f, c.title, c.xlabel, c.ylabel);
  const size_t ncat = std::max<size_t>(1, c.categories.size()), nser = std::max<size_t>(1, c.series.size());
  const double group = f.pw() / static_cast<double>(ncat), bar = group * 0.8 / static_cast<double>(nser);
  const bool values = ncat * nser <= 24;  // value labels while they fit
  for (size_t k = 0; k < c.categories.size(); ++k) {
    const double gx = f.left + group * static_cast<double>(k);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(gx + group / 2),
                       num(f.top + f.ph() + 15), escape(c.categories[k]));
    for (size_t s = 0; s < c.series.size(); ++s) {
      if (k >= c.series[s].values.size() || !std::isfinite(c.series[s].values[k])) continue;
      const double v = c.series[s].values[k];
      const double x = gx + group * 0.1 + bar * static_cast<double>(s);
      const double y0 = Y(0), y1 = Y(v);
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {:.4g}</title></rect>\n",
          num(x), num(std::min(y0, y1)), num(std::max(1.0, bar - 1)), num(std::abs(y1 - y0)),
          c.series[s].color, escape(c.series[s].name), v);
      if (values)
        out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{:.2f}</text>\n",
                           num(x + bar / 2), num(std::min(y0, y1) - 3), v);
    }
  }
  out += leg;
  out += "</svg>\n";
  return out;
}

std::string color_map(double t) {
  if (!std::isfinite(t)) return "#dddddd";
  t = std::clamp(t, 0.0, 1.0);
  // Viridis at 0, 1/4, 1/2, 3/4, 1.
  static const int stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  const double p = t * 4;
  const int i = std::min(3, static_cast<int>(p));
  const double u = p - i;
  int rgb[3];
  for (int k = 0; k < 3; ++k)
    rgb[k] = static_cast<int>(std::lround(stops[i][k] + u * (stops[i + 1][k] - stops[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string heatmap(const Heatmap& h) {
  const double cell = std::max(1, h.cell);
  const double font = std::min(10.0, cell - 1);
  const bool rlabels = !h.row_labels.empty() && font >= 5, clabels = !h.col_labels.empty() && font >= 5;
  auto label_space = [&](const std::vector<std::string>& labels) {
    double w = 0;
    for (const std::string& s : labels) w = std::max(w, text_width(truncate_utf8(s, 10), font));
    return w + 6;
  };
  const double left = 34 + (rlabels ? label_space(h.row_labels) : 0);
  const double top = 30 + (clabels ? label_space(h.col_labels) : 0);
  const double gw = cell * static_cast<double>(h.cols), gh = cell * static_cast<double>(h.rows);
  const double bar_x = left + gw + 14, width = bar_x + 14 + 46;
  const double height = top + std::max(gh, 120.0) + 30;
  std::string out = svg_open(h.id, width, height);
  out += fmt::format(
      "<text class=\"title\" x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" "
      "font-weight=\"bold\">{}</text>\n",
      num(width / 2), escape(h.title));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} &#8594;</text>\n", num(left + gw / 2),
                     num(top + gh + 18), escape(h.xlabel));
  out += fmt::format(
      "<text x=\"12\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {})\">{} &#8594;</text>\n",
      num(top + gh / 2), num(top + gh / 2), escape(h.ylabel));
  const double span = h.vmax > h.vmin ? h.vmax - h.vmin : 1;
  out += "<g shape-rendering=\"crispEdges\">\n";
  for (int64_t r = 0; r < h.rows; ++r) {
    for (int64_t c = 0; c < h.cols; ++c) {
      const size_t i = static_cast<size_t>(r * h.cols + c);
      const double v = i < h.values.size() ? h.values[i] : std::nan("");
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>",
                         num(left + cell * c), num(top + cell * r), num(cell), num(cell),
                         color_map((v - h.vmin) / span));
    }
    out += '\n';
  }
  out += "</g>\n";
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
                     num(left), num(top), num(gw), num(gh));
  if (rlabels)
    for (int64_t r = 0; r < h.rows && r < static_cast<int64_t>(h.row_labels.size()); ++r)
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"{}\">{}</text>\n",
                         num(left - 3), num(top + cell * r + cell / 2 + font * 0.35), num(font),
                         escape(truncate_utf8(h.row_labels[r], 10)));
  if (clabels)
    for (int64_t c = 0; c < h.cols && c < static_cast<int64_t>(h.col_labels.size()); ++c) {
      const double x = left + cell * c + cell / 2 + font * 0.35, y = top - 3;
      out +=
          fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" transform=\"rotate(-90 {} {})\">{}</text>\n",
                      num(x), num(y), num(font), num(x), num(y), escape(truncate_utf8(h.col_labels[c], 10)));
    }
  // The color scale: 40 bands from vmin (bottom) to vmax (top), ticks on the right.
  const double bar_h = std::max(gh, 120.0);
  out += "<g class=\"colorbar\" shape-rendering=\"crispEdges\">";
  for (int k = 0; k < 40; ++k)
    out +=
        fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" fill=\"{}\"/>", num(bar_x),
                    num(top + bar_h * (39 - k) / 40.0), num(bar_h / 40.0 + 0.5), color_map((k + 0.5) / 40.0));
  out += "</g>\n";
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
                     num(bar_x), num(top), num(bar_h));
  const std::vector<double> ticks = nice_ticks(h.vmin, h.vmax, 4);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double v : ticks) {
    if (v < h.vmin - 1e-12 || v > h.vmax + 1e-12) continue;
    const double y = top + bar_h - (v - h.vmin) / span * bar_h;
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        num(bar_x + 14), num(y), num(bar_x + 18), num(y), num(bar_x + 20), num(y + 4),
        escape(tick_label(v, step)));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace saobp::svg
