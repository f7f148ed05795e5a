// frugal plan --timeline FILE.svg: with several strategies, first their live
// arena bytes on one scale; then a panel per strategy, each on its own
// scale: the live bytes over the step's schedule, stacked by kind, with the
// arena, the lower bound, the start of the backward pass, the spans of
// recomputation and the tensors live at the peak.
#include <algorithm>
#include <array>
#include <cstdio>
#include <tuple>

#include "cli.h"

namespace frugal::cli {
namespace {

constexpr int kWidth = 1080, kLeft = 80, kPlotWidth = kTimelinePoints, kPanelHeight = 250, kPlotHeight = 170, kTop = 50;
const char* const kColors[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52"};
// The overview's lines, a color per strategy.
const char* const kStrategyColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};

std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// "x,y " to a tenth of a pixel.
std::string Point(double x, double y) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", x, y);
  return buf;
}

// At most 44 characters: the end of a long name, which says the most.
std::string Shortened(const std::string& s) { return s.size() <= 44 ? s : "..." + s.substr(s.size() - 41); }

// A plot's axes from y0 (ymax bytes) down to base (0): the bytes at five
// ticks, the y axis named, the x axis named by x_label.
std::string Axes(int y0, int base, double ymax, const std::string& x_label) {
  std::string svg = Fmt("<line x1=\"", kLeft, "\" y1=\"", base, "\" x2=\"", kLeft + kPlotWidth, "\" y2=\"", base,
                        "\" stroke=\"black\"/>\n<line x1=\"", kLeft, "\" y1=\"", y0, "\" x2=\"", kLeft, "\" y2=\"",
                        base, "\" stroke=\"black\"/>\n");
  for (int k = 0; k <= 4; ++k) {
    const double y = base - (base - y0) * k / 4.0;
    svg += Fmt("<line x1=\"", kLeft - 4, "\" y1=\"", y, "\" x2=\"", kLeft, "\" y2=\"", y,
               "\" stroke=\"black\"/>\n<text x=\"", kLeft - 6, "\" y=\"", y + 4, "\" text-anchor=\"end\">",
               k == 0 ? std::string("0") : HumanBytes(static_cast<int64_t>(ymax * k / 4)), "</text>\n");
  }
  return svg + Fmt("<text transform=\"translate(12,", (y0 + base) / 2, ") rotate(-90)\" text-anchor=\"middle\">",
                   "live bytes</text>\n<text x=\"", kLeft + kPlotWidth, "\" y=\"", base + 15, "\" text-anchor=\"end\">",
                   x_label, "</text>\n");
}

// A dashed vertical line at x from y0 to base, labelled "backward".
std::string BackwardMark(double x, int y0, int base, const char* color) {
  return Fmt("<line x1=\"", x, "\" y1=\"", y0, "\" x2=\"", x, "\" y2=\"", base, "\" stroke=\"", color,
             "\" stroke-dasharray=\"4,3\"/>\n<text x=\"", x + 3, "\" y=\"", y0 + 10, "\" fill=\"", color,
             "\" font-size=\"10\">backward</text>\n");
}

int64_t Total(const std::array<int64_t, MemoryTimeline::kNumKinds>& bytes) {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

// Every strategy's live bytes on one scale, each over its own schedule (a
// recomputing plan's is longer: its mirrors are steps too).
std::string Overview(const std::vector<TimelinePanel>& panels, int y0) {
  const int base = y0 + kPlotHeight;
  double ymax = 1;
  for (const TimelinePanel& p : panels)
    ymax = std::max({ymax, static_cast<double>(p.arena_bytes), static_cast<double>(p.timeline.peak_bytes)});
  ymax *= 1.08;
  std::string svg = Fmt("<text x=\"", kLeft, "\" y=\"", y0 - 8,
                        "\" font-weight=\"bold\">every strategy on one scale: live bytes over its step</text>\n");
  for (size_t i = 0; i < panels.size(); ++i) {
    const MemoryTimeline& t = panels[i].timeline;
    const char* color = kStrategyColors[i % (sizeof(kStrategyColors) / sizeof(kStrategyColors[0]))];
    auto x_of = [&](double step) { return kLeft + kPlotWidth * step / std::max(1, t.num_steps); };
    std::string points;
    for (size_t j = 0; j < t.steps.size(); ++j)
      points += Point(x_of(t.steps[j] + 0.5), base - kPlotHeight * static_cast<double>(Total(t.bytes[j])) / ymax);
    svg += Fmt("<polyline fill=\"none\" stroke=\"", color, "\" stroke-width=\"1.5\" points=\"", points, "\"/>\n");
    svg += Fmt("<line x1=\"", x_of(t.backward_step), "\" y1=\"", base - 6, "\" x2=\"", x_of(t.backward_step),
               "\" y2=\"", base, "\" stroke=\"", color, "\" stroke-width=\"2\"/>\n");
    const int ly = y0 + 4 + 15 * static_cast<int>(i);
    svg += Fmt("<line x1=\"", kLeft + kPlotWidth + 12, "\" y1=\"", ly - 4, "\" x2=\"", kLeft + kPlotWidth + 28,
               "\" y2=\"", ly - 4, "\" stroke=\"", color, "\" stroke-width=\"2\"/><text x=\"", kLeft + kPlotWidth + 32,
               "\" y=\"", ly, "\">", Escaped(panels[i].name), " ", HumanBytes(panels[i].arena_bytes), "</text>\n");
  }
  return svg + Axes(y0, base, ymax,
                    "step, as a fraction of each schedule (a tick on the axis: where its backward pass starts)");
}

}  // namespace

void WriteTimelineSvg(const std::string& path, const std::string& title, const std::vector<TimelinePanel>& panels) {
  const bool overview = panels.size() > 1;
  const int num_panels = static_cast<int>(panels.size()) + overview;
  std::string svg =
      Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", kWidth, "\" height=\"",
          kTop + kPanelHeight * num_panels + 10,
          "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
          "fill=\"white\"/>\n<text x=\"",
          kLeft, "\" y=\"20\" font-size=\"15\">", Escaped(title), ": live arena bytes over one training step</text>\n");
  for (int k = 0; k < MemoryTimeline::kNumKinds; ++k) {  // the legend
    const int x = kLeft + 150 * k;
    svg += Fmt("<rect x=\"", x, "\" y=\"30\" width=\"12\" height=\"12\" fill=\"", kColors[k], "\"/><text x=\"", x + 16,
               "\" y=\"40\">", MemoryTimeline::KindName(k), "</text>\n");
  }
  svg += Fmt("<rect x=\"", kLeft + 600, "\" y=\"30\" width=\"12\" height=\"12\" fill=\"#f6e0cf\"/><text x=\"",
             kLeft + 616, "\" y=\"40\">recomputing</text>\n");
  if (overview) svg += Overview(panels, kTop + 30);
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
    svg += Fmt("<text x=\"", kLeft, "\" y=\"", y0 - 8, "\" font-weight=\"bold\">", Escaped(p.name), ": arena ",
               HumanBytes(p.arena_bytes), ", lower bound ", HumanBytes(p.lower_bound_bytes), ", ", p.recomputed,
               " nodes recomputed (+", extra, "% FLOPs)</text>\n");
    // Spans of recomputation, merged where closer than a pixel.
    double run_start = -1, run_end = -1;
    auto flush = [&] {
      if (run_start < 0) return;
      svg += Fmt("<rect x=\"", x_of(run_start), "\" y=\"", y0, "\" width=\"",
                 std::max(1.0, x_of(run_end + 1) - x_of(run_start)), "\" height=\"", kPlotHeight,
                 "\" fill=\"#f6e0cf\"/>\n");
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
      std::string upper, lower;
      bool any = false;
      for (size_t j = 0; j < t.steps.size(); ++j) {
        const double x = x_of(t.steps[j] + 0.5);
        any = any || t.bytes[j][k] > 0;
        upper += Point(x, y_of(below[j] + static_cast<double>(t.bytes[j][k])));
        lower = Point(x, y_of(below[j])) + lower;
        below[j] += static_cast<double>(t.bytes[j][k]);
      }
      if (any) svg += Fmt("<polygon fill=\"", kColors[k], "\" points=\"", upper, lower, "\"/>\n");
    }
    // Axes, the backward pass's start, the arena and the lower bound.
    svg += Axes(y0, base, ymax, Fmt("step: ", t.num_steps, " nodes in schedule order (forward, then backward)"));
    svg += BackwardMark(x_of(t.backward_step), y0, base, "black");
    for (const auto& [bytes, label, dash] :
         {std::tuple<int64_t, const char*, const char*>{p.arena_bytes, "arena", "6,3"},
          {p.lower_bound_bytes, "lower bound", "2,3"}}) {
      svg +=
          Fmt("<line x1=\"", kLeft, "\" y1=\"", y_of(static_cast<double>(bytes)), "\" x2=\"", kLeft + kPlotWidth,
              "\" y2=\"", y_of(static_cast<double>(bytes)), "\" stroke=\"black\" stroke-dasharray=\"", dash, "\"/>\n");
    }
    // The peak and what is live there.
    const double px = x_of(t.peak_step + 0.5), py = y_of(static_cast<double>(t.peak_bytes));
    svg += Fmt("<circle cx=\"", px, "\" cy=\"", py, "\" r=\"4\" fill=\"none\" stroke=\"black\"/>\n<text x=\"",
               kLeft + kPlotWidth + 12, "\" y=\"", y0 + 4, "\">peak ", HumanBytes(t.peak_bytes), " at step ",
               t.peak_step, ":</text>\n");
    for (size_t j = 0; j < t.peak_tensors.size(); ++j) {
      svg += Fmt("<text x=\"", kLeft + kPlotWidth + 12, "\" y=\"", y0 + 20 + 15 * static_cast<int>(j), "\">",
                 Escaped(Shortened(t.peak_tensors[j].first)), " ", HumanBytes(t.peak_tensors[j].second), "</text>\n");
    }
  }
  svg += "</svg>\n";
  try {
    WriteFileAtomic(path, svg);
  } catch (const Error& e) { throw Error(Fmt("--timeline ", e.what())); }
}

}  // namespace frugal::cli
