// Random DAGs of functions over shared variables, run on the threaded
// engine many times and compared with a sequential replay in push order:
// every function must see exactly the versions of its variables that the
// replay saw, no write may overlap another access of its variable, the
// writes of each variable must come in push order, and the final values
// must be equal.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "frugal/engine.h"

namespace frugal {
namespace {

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  return z ^ (z >> 31);
}

struct RandomOp {
  std::vector<int> reads, writes;          // as pushed: may repeat, may overlap
  std::vector<int> eff_reads, eff_writes;  // what the engine honours
  int priority = 0;
  FnKind kind = FnKind::kCompute;
  bool async = false;
  int spin = 0;         // busy-work iterations, to let functions overlap
  int wait_after = -1;  // WaitForVar on this variable after pushing (-1: none)
};

std::vector<RandomOp> MakeOps(std::mt19937_64& rng, int num_vars, int num_ops) {
  std::vector<RandomOp> ops(num_ops);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  for (RandomOp& op : ops) {
    for (int k = pick(4); k > 0; --k) op.reads.push_back(pick(num_vars));
    for (int k = pick(3); k > 0; --k) op.writes.push_back(pick(num_vars));
    for (int w : op.writes)
      if (std::count(op.eff_writes.begin(), op.eff_writes.end(), w) == 0) op.eff_writes.push_back(w);
    for (int r : op.reads)
      if (std::count(op.eff_writes.begin(), op.eff_writes.end(), r) == 0 &&
          std::count(op.eff_reads.begin(), op.eff_reads.end(), r) == 0)
        op.eff_reads.push_back(r);
    op.priority = pick(3) - 1;
    op.kind = pick(8) == 0 ? FnKind::kIO : FnKind::kCompute;
    op.async = pick(6) == 0;
    op.spin = pick(4) == 0 ? pick(20000) : 0;
    if (pick(25) == 0) op.wait_after = pick(num_vars);
  }
  return ops;
}

// What each function saw and did, per run.
struct Trace {
  std::vector<std::vector<int64_t>> seen_versions;  // per op, per effective variable (reads then writes)
  std::vector<uint64_t> results;                    // per op
  std::vector<uint64_t> values;                     // per variable, at the end
  std::vector<std::vector<int>> writers;            // per variable: ops that wrote it, in order
};

// What op i sees: the versions of its effective variables (reads, then
// writes) appended to *seen, and the hash of their values it returns.
template <typename Versions>
uint64_t Observe(const RandomOp& op, size_t i, const Versions& version, const std::vector<uint64_t>& values,
                 std::vector<int64_t>* seen) {
  uint64_t h = i;
  for (const std::vector<int>* vars : {&op.eff_reads, &op.eff_writes})
    for (int v : *vars) {
      seen->push_back(version[v]);
      h = Mix(h, values[v]);
    }
  return h;
}

// The replay: one function at a time, in push order.
Trace Replay(const std::vector<RandomOp>& ops, int num_vars) {
  Trace t;
  t.values.assign(num_vars, 0);
  t.writers.assign(num_vars, {});
  std::vector<int64_t> version(num_vars, 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const RandomOp& op = ops[i];
    std::vector<int64_t> seen;
    const uint64_t h = Observe(op, i, version, t.values, &seen);
    for (int w : op.eff_writes) {
      t.values[w] = Mix(h, w);
      ++version[w];
      t.writers[w].push_back(static_cast<int>(i));
    }
    t.seen_versions.push_back(seen);
    t.results.push_back(h);
  }
  return t;
}

// Completes asynchronous functions from a thread of its own, in order.
class Completer {
 public:
  Completer() : thread_([this] { Loop(); }) {}
  ~Completer() {
    {
      std::lock_guard<std::mutex> completer_lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Later(std::function<void()> f) {
    std::lock_guard<std::mutex> completer_lock(mu_);  // notify under it: see WorkerPool::Enqueue
    queue_.push_back(std::move(f));
    cv_.notify_all();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> completer_lock(mu_);
        cv_.wait(completer_lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Runs the ops on the engine, checking exclusivity as they run.
Trace RunOnEngine(Engine* e, const std::vector<RandomOp>& ops, int num_vars, std::atomic<int>* violations) {
  Trace t;
  t.values.assign(num_vars, 0);
  t.writers.assign(num_vars, {});
  t.seen_versions.resize(ops.size());
  t.results.resize(ops.size());
  std::vector<std::atomic<int64_t>> version(num_vars);
  std::vector<std::atomic<int>> active_reads(num_vars), active_writes(num_vars);
  for (int v = 0; v < num_vars; ++v) {
    version[v] = 0;
    active_reads[v] = 0;
    active_writes[v] = 0;
  }
  std::vector<Var> vars(num_vars);
  for (Var& v : vars) v = e->NewVar();
  std::vector<int64_t> pushed_writes(num_vars, 0);
  Completer completer;

  for (size_t i = 0; i < ops.size(); ++i) {
    const RandomOp& op = ops[i];
    auto body = [&, i] {
      const RandomOp& op = ops[i];
      // Enter: no write may overlap anything; reads may overlap reads.
      for (int r : op.eff_reads) {
        ++active_reads[r];
        if (active_writes[r] != 0) ++*violations;
      }
      for (int w : op.eff_writes) {
        if (++active_writes[w] != 1 || active_reads[w] != 0) ++*violations;
      }
      std::vector<int64_t> seen;
      const uint64_t h = Observe(op, i, version, t.values, &seen);
      volatile uint64_t sink = 0;
      for (int k = 0; k < op.spin; ++k) sink = sink + Mix(k, h);
      for (int w : op.eff_writes) {
        t.values[w] = Mix(h, w);
        t.writers[w].push_back(static_cast<int>(i));
      }
      t.seen_versions[i] = seen;
      t.results[i] = h;
      // Leave: bump versions before releasing, as the engine releases after.
      for (int w : op.eff_writes) {
        ++version[w];
        --active_writes[w];
      }
      for (int r : op.eff_reads) --active_reads[r];
    };
    std::vector<Var> reads, writes;
    for (int r : op.reads) reads.push_back(vars[r]);
    for (int w : op.writes) writes.push_back(vars[w]);
    PushOptions o;
    o.priority = op.priority;
    o.kind = op.kind;
    o.name = "random op";
    if (op.async) {
      e->PushAsync(
          [&completer, body](Done done) {
            completer.Later([body, done] {
              body();
              done(nullptr);
            });
          },
          reads, writes, o);
    } else {
      e->Push(body, reads, writes, o);
    }
    for (int w : op.eff_writes) ++pushed_writes[w];
    if (op.wait_after >= 0) {
      e->WaitForVar(vars[op.wait_after]);
      if (version[op.wait_after] != pushed_writes[op.wait_after]) ++*violations;  // a write was still pending
    }
  }
  e->WaitAll();
  for (Var v : vars) e->DeleteVar(v);
  return t;
}

void ExpectSame(const Trace& got, const Trace& want, const std::string& what) {
  for (size_t i = 0; i < want.results.size(); ++i) {
    ASSERT_EQ(got.seen_versions[i], want.seen_versions[i]) << what << ": op " << i << " saw other versions";
    ASSERT_EQ(got.results[i], want.results[i]) << what << ": op " << i;
  }
  EXPECT_EQ(got.writers, want.writers) << what << ": writes out of push order";
  EXPECT_EQ(got.values, want.values) << what;
}

TEST(EngineStress, RandomDagsMatchTheSequentialReplay) {
  std::mt19937_64 rng(2024);
  for (int workers : {1, 2, 4}) {
    auto e = MakeEngine("threaded", {workers, 1});
    for (int round = 0; round < 30; ++round) {
      const int num_vars = 3 + static_cast<int>(rng() % 10);
      std::vector<RandomOp> ops = MakeOps(rng, num_vars, 300);
      Trace want = Replay(ops, num_vars);
      std::atomic<int> violations{0};
      Trace got = RunOnEngine(e.get(), ops, num_vars, &violations);
      EXPECT_EQ(violations, 0) << workers << " workers, round " << round;
      ExpectSame(got, want, Fmt(workers, " workers, round ", round));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(EngineStress, TheNaiveEngineIsTheReplay) {
  std::mt19937_64 rng(7);
  auto e = MakeEngine("naive");
  for (int round = 0; round < 5; ++round) {
    std::vector<RandomOp> ops = MakeOps(rng, 6, 200);
    std::atomic<int> violations{0};
    ExpectSame(RunOnEngine(e.get(), ops, 6, &violations), Replay(ops, 6), "naive");
    EXPECT_EQ(violations, 0);
  }
}

// Many functions, each reading every variable, then one write: the write
// must wait for all of them, under contention from several workers.
TEST(EngineStress, WriteAfterManyReads) {
  auto e = MakeEngine("threaded", {4, 1});
  for (int round = 0; round < 20; ++round) {
    Var v = e->NewVar();
    std::atomic<int> reads_done{0};
    int seen_at_write = -1;
    for (int i = 0; i < 64; ++i) e->Push([&] { ++reads_done; }, {v}, {}, {});
    e->Push([&] { seen_at_write = reads_done; }, {}, {v}, {});
    e->WaitForVar(v);
    EXPECT_EQ(seen_at_write, 64);
    e->DeleteVar(v);
  }
}

}  // namespace
}  // namespace frugal
