// A Chrome trace (chrome://tracing, Perfetto) of what ran when: complete
// events with a name, a category, a thread, begin and end in microseconds
// and arguments (e.g. "recompute": true), written as the JSON trace format:
//   {"traceEvents": [{"name": ..., "cat": ..., "ph": "X", "ts": begin,
//     "dur": end - begin, "pid": 1, "tid": ..., "args": {...}}, ...],
//    "displayTimeUnit": "ms"}
// plus a "thread_name" metadata event per named thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace frugal {

struct TraceEvent {
  std::string name, category;
  int tid = 0;
  int64_t begin_us = 0, end_us = 0;
  std::vector<std::pair<std::string, std::string>> args;  // key, value as JSON text

  TraceEvent& Arg(const std::string& key, bool v);
  TraceEvent& Arg(const std::string& key, int v) { return Arg(key, static_cast<int64_t>(v)); }
  TraceEvent& Arg(const std::string& key, int64_t v);
  TraceEvent& Arg(const std::string& key, double v);  // NaN and infinities become null
  TraceEvent& Arg(const std::string& key, const std::string& v);
  TraceEvent& Arg(const std::string& key, const char* v) { return Arg(key, std::string(v)); }
};

// The JSON string literal of s, quotes included.
std::string JsonString(const std::string& s);

class TraceWriter {
 public:
  TraceWriter();  // the time origin of NowMicros
  // Microseconds since construction (steady clock).
  int64_t NowMicros() const;
  // Thread-safe.
  void Add(TraceEvent e);
  void SetThreadName(int tid, const std::string& name);
  size_t size() const;
  // Events ordered by begin time (then thread), so equal inputs give equal text.
  std::string ToJson() const;
  // Throws Error naming path if it cannot be written.
  void Write(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::map<int, std::string> thread_names_;
};

// Records [construction, destruction) as one event on `w` (if non-null).
// A small stable number for the calling thread (1, 2, ... in order of first
// call), for the "tid" of events.
int TraceThreadId();

class ScopedTrace {
 public:
  ScopedTrace(TraceWriter* w, std::string name, std::string category, int tid);
  ~ScopedTrace();
  TraceEvent& event() { return e_; }  // to add args

 private:
  TraceWriter* w_;
  TraceEvent e_;
};

}  // namespace frugal
