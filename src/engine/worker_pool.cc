#include <pthread.h>

#include "backend/cpu/parallel.h"
#include "engine/threaded_engine.h"

namespace frugal::engine_internal {

WorkerPool::WorkerPool(std::string name, int threads, int kernel_threads, RunFn run)
    : name_(std::move(name)), kernel_threads_(kernel_threads), run_(std::move(run)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> pool_lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Enqueue(Op* op) {
  std::lock_guard<std::mutex> pool_lock(mu_);
  ready_.push(op);
  // Busy workers look at the queue before they sleep. Notify under the lock:
  // once it is released, the op may run and finish, the last wait return and
  // the pool be destroyed.
  if (idle_ > 0) cv_.notify_one();
}

void WorkerPool::Loop(int index) {
  // "frugal-cpu0": visible in top -H and debuggers (at most 15 characters).
  pthread_setname_np(pthread_self(), (name_ + std::to_string(index)).substr(0, 15).c_str());
  cpu::SetKernelThreads(kernel_threads_);
  cpu::FlushDenormals();
  for (;;) {
    Op* op;
    {
      std::unique_lock<std::mutex> pool_lock(mu_);
      while (ready_.empty() && !stop_) {
        ++idle_;
        cv_.wait(pool_lock);
        --idle_;
      }
      if (ready_.empty()) return;  // stopping, and nothing left
      op = ready_.top();
      ready_.pop();
    }
    run_(op);
  }
}

}  // namespace frugal::engine_internal
