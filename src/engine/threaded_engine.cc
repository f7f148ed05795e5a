// The threaded engine: dependency tracking per variable (see
// threaded_engine.h), a CPU worker pool, a dedicated I/O thread, and one
// worker per other device (the place of a CUDA stream).
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>

#include "backend/cpu/parallel.h"
#include "engine/engine_internal.h"
#include "engine/threaded_engine.h"

namespace frugal::engine_internal {
namespace {

class ThreadedEngine : public Engine {
 public:
  explicit ThreadedEngine(const EngineOptions& o);
  ~ThreadedEngine() override;

  Var NewVar() override;
  void DeleteVar(Var v) override;
  void Push(std::function<void()> fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
            const PushOptions& opts) override;
  void PushAsync(AsyncFn fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                 const PushOptions& opts) override;
  void WaitForVar(Var v) override;
  void WaitAll() override;
  int KernelThreads(Device dev) const override { return dev.type == DeviceType::kCPU ? kernel_threads_ : 1; }
  const char* name() const override { return "threaded"; }
  std::string Describe() const override;

 private:
  VarState* Lookup(Var v);                       // engine lock held
  WorkerPool* PoolFor(const PushOptions& opts);  // engine lock held
  void Enqueue(Op* op, const std::vector<Var>& reads, const std::vector<Var>& writes);
  // Lets the front of v's queue go as far as the rules allow; functions
  // whose last blocking variable this was are added to *ready.
  void Advance(VarState* v, std::vector<Op*>* ready);  // engine lock held
  void FreeVar(VarState* v);                           // engine lock held
  static void Dispatch(const std::vector<Op*>& ready);
  void Run(Op* op);  // on a worker
  void Finish(Op* op, std::exception_ptr error);
  std::exception_ptr TakeError();  // engine lock held

  const int cores_, cpu_workers_, kernel_threads_;
  std::mutex mu_;                    // the engine lock: every VarState, pending_, error_, pools_
  std::condition_variable done_cv_;  // pending_ reached 0, or a wait marker was reached
  std::deque<VarState> vars_;        // by slot; a deque keeps addresses stable
  std::vector<uint32_t> free_slots_;
  int64_t pending_ = 0;  // pushed functions not yet finished
  uint64_t next_seq_ = 0;
  std::exception_ptr error_;         // the first error since the last wait
  std::atomic<bool> failed_{false};  // error_ is set: skip functions that have not started
  // A wait reported an error: functions pushed before it that have not
  // started are skipped too (seq below this).
  std::atomic<uint64_t> skip_below_{0};
  std::unique_ptr<WorkerPool> cpu_, io_;
  std::map<int, std::unique_ptr<WorkerPool>> device_pools_;  // other devices, made on first use
};

ThreadedEngine::ThreadedEngine(const EngineOptions& o)
    : cores_(cpu::NumCores()),
      // At most two workers when the caller leaves it open; training and
      // `frugal time` choose per graph instead (MakeEngineFor, frugal/train.h).
      cpu_workers_(o.cpu_workers > 0 ? o.cpu_workers : std::min(2, cores_)),
      kernel_threads_(o.kernel_threads > 0 ? o.kernel_threads : std::max(1, cores_ / cpu_workers_)) {
  auto run = [this](Op* op) { Run(op); };
  cpu_ = std::make_unique<WorkerPool>("frugal-cpu", cpu_workers_, kernel_threads_, run);
  io_ = std::make_unique<WorkerPool>("frugal-io", 1, 1, run);
}

ThreadedEngine::~ThreadedEngine() {
  std::string error = WaitAllNoThrow(this);
  if (!error.empty()) LOG(ERROR) << "engine destroyed with an unreported error: " << error;
  device_pools_.clear();
  io_.reset();
  cpu_.reset();
}

std::string ThreadedEngine::Describe() const {
  return Fmt("threaded (cpu: ", cpu_workers_, cpu_workers_ == 1 ? " worker" : " workers", " x ", kernel_threads_,
             kernel_threads_ == 1 ? " kernel thread" : " kernel threads", ", io: 1 thread; ", cores_,
             cores_ == 1 ? " core)" : " cores)");
}

Var ThreadedEngine::NewVar() {
  std::lock_guard<std::mutex> engine_lock(mu_);
  if (free_slots_.empty()) {
    free_slots_.push_back(static_cast<uint32_t>(vars_.size()));
    vars_.emplace_back();
    vars_.back().slot = free_slots_.back();
  }
  VarState& v = vars_[free_slots_.back()];
  free_slots_.pop_back();
  v.alive = true;
  v.delete_pending = false;
  return (static_cast<Var>(v.generation) << 32) | v.slot;
}

VarState* ThreadedEngine::Lookup(Var id) {
  const uint64_t slot = static_cast<uint64_t>(id) & 0xffffffffu;
  const uint32_t generation = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  CHECK(id >= 0 && slot < vars_.size()) << "engine variable " << id << " was never made by this engine";
  VarState* v = &vars_[slot];
  CHECK(v->alive && !v->delete_pending && v->generation == generation)
      << "engine variable " << id << " is used after DeleteVar";
  return v;
}

void ThreadedEngine::FreeVar(VarState* v) {
  CHECK(v->queue.empty() && v->running_reads == 0 && !v->running_write);
  v->alive = false;
  v->delete_pending = false;
  v->generation = (v->generation + 1) & 0x7fffffffu;  // a Var stays non-negative
  free_slots_.push_back(v->slot);
}

void ThreadedEngine::DeleteVar(Var id) {
  std::lock_guard<std::mutex> engine_lock(mu_);
  VarState* v = Lookup(id);
  if (v->queue.empty() && v->running_reads == 0 && !v->running_write) {
    FreeVar(v);
    return;
  }
  // Wait like a write: after every earlier read and write.
  Op* marker = new Op;
  marker->marker = Op::kDeleteMarker;
  v->queue.push_back({marker, true});
  v->delete_pending = true;
}

WorkerPool* ThreadedEngine::PoolFor(const PushOptions& opts) {
  if (opts.kind == FnKind::kIO) return io_.get();
  if (opts.device.type == DeviceType::kCPU) return cpu_.get();
  const int key = static_cast<int>(opts.device.type) * kMaxDevices + opts.device.id;
  std::unique_ptr<WorkerPool>& pool = device_pools_[key];
  if (!pool) {
    pool = std::make_unique<WorkerPool>(Fmt("frugal-", opts.device.ToString()), 1, 1, [this](Op* op) { Run(op); });
  }
  return pool.get();
}

void ThreadedEngine::Push(std::function<void()> fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                          const PushOptions& opts) {
  Op* op = new Op;
  op->fn = std::move(fn);
  op->opts = opts;
  Enqueue(op, reads, writes);
}

void ThreadedEngine::PushAsync(AsyncFn fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                               const PushOptions& opts) {
  Op* op = new Op;
  op->async_fn = std::move(fn);
  op->opts = opts;
  Enqueue(op, reads, writes);
}

void ThreadedEngine::Enqueue(Op* op, const std::vector<Var>& reads, const std::vector<Var>& writes) {
  std::vector<Op*> ready;
  {
    std::lock_guard<std::mutex> engine_lock(mu_);
    // A variable named twice counts once; one both read and written is a write.
    for (Var id : writes) {
      VarState* v = Lookup(id);
      if (std::find(op->writes.begin(), op->writes.end(), v) == op->writes.end()) op->writes.push_back(v);
    }
    for (Var id : reads) {
      VarState* v = Lookup(id);
      if (std::find(op->writes.begin(), op->writes.end(), v) == op->writes.end() &&
          std::find(op->reads.begin(), op->reads.end(), v) == op->reads.end())
        op->reads.push_back(v);
    }
    op->pool = PoolFor(op->opts);
    op->seq = next_seq_++;
    ++pending_;
    op->wait = static_cast<int>(op->reads.size() + op->writes.size());
    for (VarState* v : op->reads) {
      if (!v->running_write && v->queue.empty()) {
        ++v->running_reads;
        --op->wait;
      } else {
        v->queue.push_back({op, false});
      }
    }
    for (VarState* v : op->writes) {
      if (!v->running_write && v->running_reads == 0 && v->queue.empty()) {
        v->running_write = true;
        --op->wait;
      } else {
        v->queue.push_back({op, true});
      }
    }
    if (op->wait == 0) ready.push_back(op);
  }
  Dispatch(ready);
}

void ThreadedEngine::Advance(VarState* v, std::vector<Op*>* ready) {
  while (!v->queue.empty()) {
    const VarState::Pending p = v->queue.front();
    if (!p.write) {
      if (v->running_write) return;
      v->queue.pop_front();
      if (p.op->marker == Op::kWaitMarker) {  // every earlier write has finished
        *p.op->reached = true;
        done_cv_.notify_all();
        continue;
      }
      ++v->running_reads;
      if (--p.op->wait == 0) ready->push_back(p.op);
      continue;  // later reads may run together with this one
    }
    if (v->running_write || v->running_reads > 0) return;
    v->queue.pop_front();
    if (p.op->marker == Op::kDeleteMarker) {
      delete p.op;
      FreeVar(v);
      return;
    }
    v->running_write = true;
    if (--p.op->wait == 0) ready->push_back(p.op);
    return;
  }
}

void ThreadedEngine::Dispatch(const std::vector<Op*>& ready) {
  for (Op* op : ready) op->pool->Enqueue(op);
}

void ThreadedEngine::Run(Op* op) {
  if (failed_.load(std::memory_order_acquire) || op->seq < skip_below_.load(std::memory_order_acquire)) {
    // Skipped: a function failed after this one was pushed.
    Finish(op, nullptr);
    return;
  }
  if (op->fn) {
    std::exception_ptr error;
    try {
      op->fn();
    } catch (...) { error = std::current_exception(); }
    Finish(op, error);
    return;
  }
  // Asynchronous: whichever comes first of done and a throw finishes it. The
  // function is moved out first: done may delete the op while fn still runs.
  auto finished = std::make_shared<std::atomic<bool>>(false);
  AsyncFn fn = std::move(op->async_fn);
  try {
    fn([this, op, finished](std::exception_ptr error) {
      if (!finished->exchange(true)) Finish(op, error);
    });
  } catch (...) {
    if (!finished->exchange(true)) Finish(op, std::current_exception());
  }
}

void ThreadedEngine::Finish(Op* op, std::exception_ptr error) {
  std::vector<Op*> ready;
  {
    std::lock_guard<std::mutex> engine_lock(mu_);
    if (error && !error_) {
      error_ = NamedError(op->opts.name, error);
      failed_.store(true, std::memory_order_release);
    }
    for (VarState* v : op->reads) {
      --v->running_reads;
      Advance(v, &ready);
    }
    for (VarState* v : op->writes) {
      v->running_write = false;
      Advance(v, &ready);
    }
    if (--pending_ == 0) done_cv_.notify_all();
  }
  delete op;
  Dispatch(ready);
}

std::exception_ptr ThreadedEngine::TakeError() {
  std::exception_ptr e = error_;
  if (!e) return e;
  error_ = nullptr;
  skip_below_.store(next_seq_, std::memory_order_release);  // before failed_ clears
  failed_.store(false, std::memory_order_release);
  return e;
}

void ThreadedEngine::WaitForVar(Var id) {
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> engine_lock(mu_);
    VarState* v = Lookup(id);
    // Reads queue only behind a write, so an empty queue and no running
    // write mean every write pushed so far has finished.
    if (v->running_write || !v->queue.empty()) {
      bool reached = false;
      Op marker;
      marker.marker = Op::kWaitMarker;
      marker.reached = &reached;
      v->queue.push_back({&marker, false});
      done_cv_.wait(engine_lock, [&] { return reached; });
    }
    error = TakeError();
  }
  if (error) std::rethrow_exception(error);
}

void ThreadedEngine::WaitAll() {
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> engine_lock(mu_);
    done_cv_.wait(engine_lock, [&] { return pending_ == 0; });
    error = TakeError();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::unique_ptr<Engine> MakeThreadedEngine(const EngineOptions& opts) { return std::make_unique<ThreadedEngine>(opts); }

}  // namespace frugal::engine_internal
