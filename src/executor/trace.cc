// The Chrome trace writer (format in frugal/trace.h).
#include "frugal/trace.h"

#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "frugal/base.h"

namespace frugal {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

TraceEvent& TraceEvent::Arg(const std::string& key, bool v) {
  args.emplace_back(key, v ? "true" : "false");
  return *this;
}

TraceEvent& TraceEvent::Arg(const std::string& key, int64_t v) {
  args.emplace_back(key, std::to_string(v));
  return *this;
}

TraceEvent& TraceEvent::Arg(const std::string& key, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  args.emplace_back(key, std::isfinite(v) ? buf : "null");
  return *this;
}

TraceEvent& TraceEvent::Arg(const std::string& key, const std::string& v) {
  args.emplace_back(key, JsonString(v));
  return *this;
}

TraceWriter::TraceWriter() : origin_(std::chrono::steady_clock::now()) {}

int64_t TraceWriter::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
}

void TraceWriter::Add(TraceEvent e) {
  std::lock_guard<std::mutex> events_lock(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::SetThreadName(int tid, const std::string& name) {
  std::lock_guard<std::mutex> names_lock(mu_);
  thread_names_[tid] = name;
}

size_t TraceWriter::size() const {
  std::lock_guard<std::mutex> size_lock(mu_);
  return events_.size();
}

std::string TraceWriter::ToJson() const {
  std::vector<const TraceEvent*> order;
  std::string out = "{\"traceEvents\": [\n";
  std::lock_guard<std::mutex> json_lock(mu_);
  for (const TraceEvent& e : events_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return a->begin_us != b->begin_us ? a->begin_us < b->begin_us : a->tid < b->tid;
  });
  bool first = true;
  for (const auto& [tid, name] : thread_names_) {
    out += Fmt(first ? "" : ",\n", R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": )", tid,
               R"(, "args": {"name": )", JsonString(name), "}}");
    first = false;
  }
  for (const TraceEvent* e : order) {
    out += Fmt(first ? "" : ",\n", "{\"name\": ", JsonString(e->name), ", \"cat\": ", JsonString(e->category),
               ", \"ph\": \"X\", \"ts\": ", e->begin_us, ", \"dur\": ", std::max<int64_t>(0, e->end_us - e->begin_us),
               ", \"pid\": 1, \"tid\": ", e->tid, ", \"args\": {");
    for (size_t i = 0; i < e->args.size(); ++i)
      out += Fmt(i ? ", " : "", JsonString(e->args[i].first), ": ", e->args[i].second);
    out += "}}";
    first = false;
  }
  return out + "\n], \"displayTimeUnit\": \"ms\"}\n";
}

void TraceWriter::Write(const std::string& path) const { WriteFileAtomic(path, ToJson()); }

int TraceThreadId() {
  static std::atomic<int> next{1};
  thread_local int id = next++;
  return id;
}

ScopedTrace::ScopedTrace(TraceWriter* w, std::string name, std::string category, int tid) : w_(w) {
  if (!w_) return;
  e_.name = std::move(name);
  e_.category = std::move(category);
  e_.tid = tid;
  e_.begin_us = w_->NowMicros();
}

ScopedTrace::~ScopedTrace() {
  if (!w_) return;
  e_.end_us = w_->NowMicros();
  w_->Add(std::move(e_));
}

}  // namespace frugal
