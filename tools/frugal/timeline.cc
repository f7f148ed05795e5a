// frugal plan --timeline FILE.svg|FILE.png: with several strategies, first
// their live arena bytes on one scale; then a panel per strategy, each on
// its own scale: the live bytes over the step's schedule, stacked by kind,
// with the arena, the lower bound, the start of the backward pass, the spans
// of recomputation and the tensors live at the peak. One drawing (Draw) on
// a Canvas: SVG text, or pixels (OpenCV's drawing, anti-aliased, Hershey
// text) encoded as PNG.
#include <algorithm>
#include <array>
#include <cstdio>
#include <opencv2/imgproc.hpp>
#include <tuple>

#include "cli.h"
#include "frugal/passes/memory_plan.h"
#include "io/imgcodecs.h"

namespace frugal::cli {
namespace {

constexpr int kWidth = 1100, kLeft = 96, kPlotWidth = kTimelinePoints, kPanelHeight = 250, kPlotHeight = 170, kTop = 50;
const char* const kColors[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52"};
// The overview's lines, a color per strategy.
const char* const kStrategyColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
constexpr char kRecomputing[] = "#f6e0cf", kBlack[] = "#000000";

struct Point {
  double x, y;
};

// What the drawing needs of a surface; colors are "#rrggbb", coordinates
// SVG's (pixels, y down), text anchored at its baseline's start or end.
class Canvas {
 public:
  virtual ~Canvas() = default;
  virtual void Rect(double x, double y, double w, double h, const char* fill) = 0;
  // dash: "" (solid) or SVG's "on,off" in pixels.
  virtual void Line(Point a, Point b, const char* color, double width = 1, const char* dash = "") = 0;
  virtual void Polygon(const std::vector<Point>& p, const char* fill) = 0;
  virtual void Polyline(const std::vector<Point>& p, const char* color, double width) = 0;
  virtual void Circle(Point c, double r, const char* color) = 0;
  // size in pixels; end: anchored at its end; vertical: read bottom to top, centred at p.
  virtual void Text(Point p, const std::string& text, int size = 12, bool end = false, bool bold = false,
                    const char* color = kBlack, bool vertical = false) = 0;
};

std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// "x,y " to a tenth of a pixel.
std::string Xy(Point p) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", p.x, p.y);
  return buf;
}

class SvgCanvas : public Canvas {
 public:
  SvgCanvas(int width, int height) {
    svg_ =
        Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", height,
            "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  }
  std::string Finish() { return svg_ + "</svg>\n"; }

  void Rect(double x, double y, double w, double h, const char* fill) override {
    svg_ += Fmt("<rect x=\"", x, "\" y=\"", y, "\" width=\"", w, "\" height=\"", h, "\" fill=\"", fill, "\"/>\n");
  }
  void Line(Point a, Point b, const char* color, double width, const char* dash) override {
    svg_ += Fmt("<line x1=\"", a.x, "\" y1=\"", a.y, "\" x2=\"", b.x, "\" y2=\"", b.y, "\" stroke=\"", color,
                "\" stroke-width=\"", width, "\"", *dash ? Fmt(" stroke-dasharray=\"", dash, "\"") : "", "/>\n");
  }
  void Polygon(const std::vector<Point>& p, const char* fill) override {
    svg_ += Fmt("<polygon fill=\"", fill, "\" points=\"", Points(p), "\"/>\n");
  }
  void Polyline(const std::vector<Point>& p, const char* color, double width) override {
    svg_ += Fmt("<polyline fill=\"none\" stroke=\"", color, "\" stroke-width=\"", width, "\" points=\"", Points(p),
                "\"/>\n");
  }
  void Circle(Point c, double r, const char* color) override {
    svg_ += Fmt("<circle cx=\"", c.x, "\" cy=\"", c.y, "\" r=\"", r, "\" fill=\"none\" stroke=\"", color, "\"/>\n");
  }
  void Text(Point p, const std::string& text, int size, bool end, bool bold, const char* color,
            bool vertical) override {
    const std::string where =
        vertical ? Fmt("transform=\"translate(", p.x, ",", p.y, ") rotate(-90)\" text-anchor=\"middle\"")
                 : Fmt("x=\"", p.x, "\" y=\"", p.y, "\"", end ? " text-anchor=\"end\"" : "");
    svg_ += Fmt("<text ", where, " font-size=\"", size, "\"", bold ? " font-weight=\"bold\"" : "",
                std::string(color) == kBlack ? "" : Fmt(" fill=\"", color, "\""), ">", Escaped(text), "</text>\n");
  }

 private:
  static std::string Points(const std::vector<Point>& p) {
    std::string s;
    for (const Point& q : p) s += Xy(q);
    return s;
  }
  std::string svg_;
};

// Pixels through OpenCV's drawing (anti-aliased), text in its Hershey font.
class PixelCanvas : public Canvas {
 public:
  PixelCanvas(int width, int height) : img_(height, width, CV_8UC3, cv::Scalar(255, 255, 255)) {}
  const cv::Mat& image() const { return img_; }

  void Rect(double x, double y, double w, double h, const char* fill) override {
    cv::rectangle(img_, cv::Rect2d(x, y, w, h), Bgr(fill), cv::FILLED);
  }
  void Line(Point a, Point b, const char* color, double width, const char* dash) override {
    double on = 0, off = 0;
    if (*dash == '\0' || std::sscanf(dash, "%lf,%lf", &on, &off) != 2 || on <= 0) {
      cv::line(img_, Px(a), Px(b), Bgr(color), Thick(width), cv::LINE_AA);
      return;
    }
    const double length = std::hypot(b.x - a.x, b.y - a.y);
    for (double s = 0; s < length; s += on + off) {
      const double e = std::min(length, s + on);
      cv::line(img_, Px(At(a, b, s / length)), Px(At(a, b, e / length)), Bgr(color), Thick(width), cv::LINE_AA);
    }
  }
  void Polygon(const std::vector<Point>& p, const char* fill) override {
    std::vector<std::vector<cv::Point>> poly(1);
    for (const Point& q : p) poly[0].push_back(Px(q));
    cv::fillPoly(img_, poly, Bgr(fill), cv::LINE_AA);
  }
  void Polyline(const std::vector<Point>& p, const char* color, double width) override {
    std::vector<std::vector<cv::Point>> line(1);
    for (const Point& q : p) line[0].push_back(Px(q));
    cv::polylines(img_, line, false, Bgr(color), Thick(width), cv::LINE_AA);
  }
  void Circle(Point c, double r, const char* color) override {
    cv::circle(img_, Px(c), static_cast<int>(std::lround(r)), Bgr(color), 1, cv::LINE_AA);
  }
  void Text(Point p, const std::string& text, int size, bool end, bool bold, const char* color,
            bool vertical) override {
    const double scale = size / 30.0;  // Hershey simplex: about 22 px tall at scale 1, its capitals 0.7 of a size
    const int weight = bold ? 2 : 1;
    int baseline = 0;
    const cv::Size box = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, scale, weight, &baseline);
    if (!vertical) {
      const cv::Point at(static_cast<int>(std::lround(end ? p.x - box.width : p.x)),
                         static_cast<int>(std::lround(p.y)));
      cv::putText(img_, text, at, cv::FONT_HERSHEY_SIMPLEX, scale, Bgr(color), weight, cv::LINE_AA);
      return;
    }
    // Drawn level on its own image, turned a quarter left, copied centred at p.
    cv::Mat level(box.height + baseline + 2, box.width + 2, CV_8UC3, cv::Scalar(255, 255, 255));
    cv::putText(level, text, cv::Point(1, box.height + 1), cv::FONT_HERSHEY_SIMPLEX, scale, Bgr(color), weight,
                cv::LINE_AA);
    cv::Mat turned;
    cv::rotate(level, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
    const cv::Rect to(static_cast<int>(p.x) - turned.cols / 2, static_cast<int>(p.y) - turned.rows / 2, turned.cols,
                      turned.rows);
    const cv::Rect fits = to & cv::Rect(0, 0, img_.cols, img_.rows);
    turned(cv::Rect(fits.x - to.x, fits.y - to.y, fits.width, fits.height)).copyTo(img_(fits));
  }

 private:
  static cv::Scalar Bgr(const char* hex) {
    unsigned r = 0, g = 0, b = 0;
    std::sscanf(hex, "#%2x%2x%2x", &r, &g, &b);
    return cv::Scalar(b, g, r);
  }
  static cv::Point Px(Point p) { return {static_cast<int>(std::lround(p.x)), static_cast<int>(std::lround(p.y))}; }
  static Point At(Point a, Point b, double f) { return {a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f}; }
  static int Thick(double width) { return std::max(1, static_cast<int>(std::lround(width))); }
  cv::Mat img_;
};

// At most 44 characters: the end of a long name, which says the most.
std::string Shortened(const std::string& s) { return s.size() <= 44 ? s : "..." + s.substr(s.size() - 41); }

// A plot's axes from y0 (ymax bytes) down to base (0): the bytes at five
// ticks, the y axis named, the x axis named by x_label.
void Axes(Canvas& c, int y0, int base, double ymax, const std::string& x_label) {
  c.Line({kLeft, static_cast<double>(base)}, {kLeft + kPlotWidth, static_cast<double>(base)}, kBlack);
  c.Line({kLeft, static_cast<double>(y0)}, {kLeft, static_cast<double>(base)}, kBlack);
  for (int k = 0; k <= 4; ++k) {
    const double y = base - (base - y0) * k / 4.0;
    c.Line({kLeft - 4, y}, {kLeft, y}, kBlack);
    c.Text({kLeft - 6, y + 4}, k == 0 ? std::string("0") : HumanBytes(static_cast<int64_t>(ymax * k / 4)), 12, true);
  }
  c.Text({12, (y0 + base) / 2.0}, "live bytes", 12, false, false, kBlack, /*vertical=*/true);
  c.Text({kLeft + kPlotWidth, base + 15.0}, x_label, 12, true);
}

int64_t Total(const std::array<int64_t, MemoryTimeline::kNumKinds>& bytes) {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

// Every strategy's live bytes on one scale, each over its own schedule (a
// recomputing plan's is longer: its mirrors are steps too).
void Overview(Canvas& c, const std::vector<TimelinePanel>& panels, int y0) {
  const int base = y0 + kPlotHeight;
  double ymax = 1;
  for (const TimelinePanel& p : panels)
    ymax = std::max({ymax, static_cast<double>(p.arena_bytes), static_cast<double>(p.timeline.peak_bytes)});
  ymax *= 1.08;
  c.Text({kLeft, y0 - 8.0}, "every strategy on one scale: live bytes over its step", 12, false, true);
  for (size_t i = 0; i < panels.size(); ++i) {
    const MemoryTimeline& t = panels[i].timeline;
    const char* color = kStrategyColors[i % (sizeof(kStrategyColors) / sizeof(kStrategyColors[0]))];
    auto x_of = [&](double step) { return kLeft + kPlotWidth * step / std::max(1, t.num_steps); };
    std::vector<Point> line;
    for (size_t j = 0; j < t.steps.size(); ++j)
      line.push_back({x_of(t.steps[j] + 0.5), base - kPlotHeight * static_cast<double>(Total(t.bytes[j])) / ymax});
    c.Polyline(line, color, 1.5);
    c.Line({x_of(t.backward_step), base - 6.0}, {x_of(t.backward_step), static_cast<double>(base)}, color, 2);
    const double ly = y0 + 4 + 15 * static_cast<double>(i);
    c.Line({kLeft + kPlotWidth + 12, ly - 4}, {kLeft + kPlotWidth + 28, ly - 4}, color, 2);
    c.Text({kLeft + kPlotWidth + 32, ly}, panels[i].name + " " + HumanBytes(panels[i].arena_bytes));
  }
  Axes(c, y0, base, ymax, "step, as a fraction of each schedule (a tick on the axis: where its backward pass starts)");
}

void Draw(Canvas& c, const std::string& title, const std::vector<TimelinePanel>& panels) {
  const bool overview = panels.size() > 1;
  c.Text({kLeft, 20}, title + ": live arena bytes over one training step", 15);
  for (int k = 0; k < MemoryTimeline::kNumKinds; ++k) {  // the legend
    const int x = kLeft + 150 * k;
    c.Rect(x, 30, 12, 12, kColors[k]);
    c.Text({x + 16.0, 40}, MemoryTimeline::KindName(k));
  }
  c.Rect(kLeft + 600, 30, 12, 12, kRecomputing);
  c.Text({kLeft + 616, 40}, "recomputing");
  if (overview) Overview(c, panels, kTop + 30);
  for (size_t i = 0; i < panels.size(); ++i) {
    const TimelinePanel& p = panels[i];
    const MemoryTimeline& t = p.timeline;
    // Each panel on its own scale: the strategies differ by orders of magnitude.
    const double ymax = 1.08 * static_cast<double>(std::max({int64_t{1}, p.arena_bytes, t.peak_bytes}));
    const int y0 = kTop + kPanelHeight * (static_cast<int>(i) + overview) + 30, base = y0 + kPlotHeight;
    auto x_of = [&](double step) { return kLeft + kPlotWidth * step / std::max(1, t.num_steps); };
    auto y_of = [&](double bytes) { return base - kPlotHeight * bytes / ymax; };
    char extra[32];
    std::snprintf(extra, sizeof(extra), "%.1f", p.extra_flops_percent);
    c.Text({kLeft, y0 - 8.0},
           Fmt(p.name, ": arena ", HumanBytes(p.arena_bytes), ", lower bound ", HumanBytes(p.lower_bound_bytes), ", ",
               p.recomputed, " nodes recomputed (+", extra, "% FLOPs)"),
           12, false, true);
    // Spans of recomputation, merged where closer than a pixel.
    double run_start = -1, run_end = -1;
    auto flush = [&] {
      if (run_start >= 0)
        c.Rect(x_of(run_start), y0, std::max(1.0, x_of(run_end + 1) - x_of(run_start)), kPlotHeight, kRecomputing);
    };
    for (const auto& [first, last] : t.recomputing) {
      if (run_start >= 0 && x_of(first) - x_of(run_end + 1) < 1) {
        run_end = last;
        continue;
      }
      flush();
      run_start = first, run_end = last;
    }
    flush();
    // The kinds stacked: kind k between the sums of kinds below it and through it.
    std::vector<double> below(t.steps.size(), 0);
    for (int k = 0; k < MemoryTimeline::kNumKinds; ++k) {
      std::vector<Point> upper, lower;
      bool any = false;
      for (size_t j = 0; j < t.steps.size(); ++j) {
        const double x = x_of(t.steps[j] + 0.5);
        any = any || t.bytes[j][k] > 0;
        upper.push_back({x, y_of(below[j] + static_cast<double>(t.bytes[j][k]))});
        lower.push_back({x, y_of(below[j])});
        below[j] += static_cast<double>(t.bytes[j][k]);
      }
      upper.insert(upper.end(), lower.rbegin(), lower.rend());
      if (any) c.Polygon(upper, kColors[k]);
    }
    // Axes, the backward pass's start, the arena and the lower bound.
    Axes(c, y0, base, ymax, Fmt("step: ", t.num_steps, " nodes in schedule order (forward, then backward)"));
    const double bx = x_of(t.backward_step);
    c.Line({bx, static_cast<double>(y0)}, {bx, static_cast<double>(base)}, kBlack, 1, "4,3");
    c.Text({bx + 3, y0 + 10.0}, "backward", 10);
    for (const auto& [bytes, dash] :
         {std::pair<int64_t, const char*>{p.arena_bytes, "6,3"}, {p.lower_bound_bytes, "2,3"}}) {
      const double y = y_of(static_cast<double>(bytes));
      c.Line({kLeft, y}, {kLeft + kPlotWidth, y}, kBlack, 1, dash);
    }
    // The peak and what is live there.
    c.Circle({x_of(t.peak_step + 0.5), y_of(static_cast<double>(t.peak_bytes))}, 4, kBlack);
    c.Text({kLeft + kPlotWidth + 12, y0 + 4.0}, Fmt("peak ", HumanBytes(t.peak_bytes), " at step ", t.peak_step, ":"));
    for (size_t j = 0; j < t.peak_tensors.size(); ++j) {
      c.Text({kLeft + kPlotWidth + 12, y0 + 20 + 15 * static_cast<double>(j)},
             Shortened(t.peak_tensors[j].first) + " " + HumanBytes(t.peak_tensors[j].second));
    }
  }
}

bool EndsWith(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

void CheckTimelinePath(const std::string& path) {
  FRUGAL_REQUIRE(EndsWith(path, ".svg") || EndsWith(path, ".png"), "--timeline ", path,
                 ": the timeline is an SVG or a PNG file: give a name ending in .svg or .png");
}

void WriteTimeline(const std::string& path, const std::string& title, const std::vector<TimelinePanel>& panels) {
  CheckTimelinePath(path);
  const int height = kTop + kPanelHeight * (static_cast<int>(panels.size()) + (panels.size() > 1)) + 10;
  std::string bytes;
  if (EndsWith(path, ".svg")) {
    SvgCanvas svg(kWidth, height);
    Draw(svg, title, panels);
    bytes = svg.Finish();
  } else {
    PixelCanvas png(kWidth, height);
    Draw(png, title, panels);
    std::vector<uint8_t> encoded;
    FRUGAL_REQUIRE(imgcodecs::Encode(".png", png.image(), {}, &encoded), "--timeline ", path,
                   ": OpenCV could not encode the PNG");
    bytes.assign(encoded.begin(), encoded.end());
  }
  try {
    WriteFileAtomic(path, bytes);
  } catch (const Error& e) { throw Error(Fmt("--timeline ", e.what())); }
}

}  // namespace frugal::cli
