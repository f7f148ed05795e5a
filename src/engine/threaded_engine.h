// The threaded engine's parts (private to src/engine): a pushed function
// with its dependency count, the state of one variable, and a pool of
// worker threads serving ready functions by priority.
//
// Scheduling follows MXNet's threaded engine. Each variable keeps the
// functions that wait on it in push order. A function counts the variables
// that do not yet allow it to run; a variable lets the reads at the front of
// its queue run together, and the write at the front run alone once every
// earlier read and write has finished. When the count reaches zero the
// function goes to its pool's ready queue. One engine lock guards every
// variable; the pools have their own locks.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "frugal/engine.h"

namespace frugal::engine_internal {

class WorkerPool;
struct VarState;

struct Op {
  enum Marker : uint8_t {
    kFunction,      // a pushed function
    kWaitMarker,    // WaitForVar's place in one queue: signals when reached
    kDeleteMarker,  // DeleteVar's place in one queue: frees the variable when reached
  };
  std::function<void()> fn;              // set for Push
  AsyncFn async_fn;                      // set for PushAsync
  std::vector<VarState*> reads, writes;  // disjoint, no repeats
  PushOptions opts;
  WorkerPool* pool = nullptr;
  int wait = 0;      // variables that do not yet let it run (engine lock)
  uint64_t seq = 0;  // push order: breaks ties between equal priorities
  Marker marker = kFunction;
  bool* reached = nullptr;  // kWaitMarker: set under the engine lock
};

// A first-in first-out queue that allocates nothing until its first push:
// std::deque allocates some 600 bytes when it is built, and the unrolled
// LSTM's 88,000 mostly idle variables held 27 MiB that way. The consumed
// front is dropped when the queue empties or is half consumed.
template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  const T& front() const { return items_[head_]; }
  void push_back(const T& x) { items_.push_back(x); }
  void pop_front() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 64 && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

struct VarState {
  struct Pending {
    Op* op;
    bool write;
  };
  Fifo<Pending> queue;         // functions not yet allowed by this variable, in push order
  int running_reads = 0;       // allowed reads that have not finished
  bool running_write = false;  // an allowed write has not finished
  uint32_t slot = 0;
  uint32_t generation = 0;  // bumped on delete, so a stale Var is caught
  bool alive = false;
  bool delete_pending = false;
};

// Worker threads taking ready functions from one queue: highest priority
// first, then push order. Each worker sets its kernel threads at start.
class WorkerPool {
 public:
  using RunFn = std::function<void(Op*)>;
  WorkerPool(std::string name, int threads, int kernel_threads, RunFn run);
  ~WorkerPool();  // finishes what is queued, then joins
  void Enqueue(Op* op);
  int threads() const { return static_cast<int>(threads_.size()); }
  int kernel_threads() const { return kernel_threads_; }

 private:
  struct Later {  // priority_queue puts the greatest first: the op that should run first
    bool operator()(const Op* a, const Op* b) const {
      return a->opts.priority != b->opts.priority ? a->opts.priority < b->opts.priority : a->seq > b->seq;
    }
  };
  void Loop(int index);

  const std::string name_;
  const int kernel_threads_;
  const RunFn run_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Op*, std::vector<Op*>, Later> ready_;
  int idle_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace frugal::engine_internal
