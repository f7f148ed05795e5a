// The naive engine: runs each pushed function at once, on the caller's
// thread, in push order. Any order a threaded engine may choose is
// equivalent to this one, so this is the reference that other engines are
// tested against, and the engine to debug with.
#include <condition_variable>
#include <mutex>

#include "backend/cpu/parallel.h"
#include "engine/engine_internal.h"

namespace frugal::engine_internal {
namespace {

// Sets the calling thread's kernel threads and flushes denormals on it for
// one function, then restores both.
class KernelThreadsScope {
 public:
  explicit KernelThreadsScope(int n) : saved_(n > 0 ? cpu::KernelThreads() : 0), fp_mode_(cpu::FpMode()) {
    cpu::FlushDenormals();
    if (n > 0) cpu::SetKernelThreads(n);
  }
  ~KernelThreadsScope() {
    if (saved_ > 0) cpu::SetKernelThreads(saved_);
    cpu::SetFpMode(fp_mode_);
  }

 private:
  int saved_;
  unsigned fp_mode_;
};

class NaiveEngine : public Engine {
 public:
  explicit NaiveEngine(int kernel_threads) : kernel_threads_(kernel_threads) {}
  Var NewVar() override { return next_var_++; }
  void DeleteVar(Var) override {}

  void Push(std::function<void()> fn, const std::vector<Var>&, const std::vector<Var>&,
            const PushOptions& opts) override {
    if (error_) return;  // after a failure, nothing more runs until a wait reports it
    KernelThreadsScope threads(kernel_threads_);
    try {
      fn();
    } catch (...) { error_ = NamedError(opts.name, std::current_exception()); }
  }

  // Runs fn and blocks until it calls done (from whichever thread).
  void PushAsync(AsyncFn fn, const std::vector<Var>&, const std::vector<Var>&, const PushOptions& opts) override {
    if (error_) return;
    struct State {
      std::mutex mu;
      std::condition_variable cv;
      bool finished = false;
      std::exception_ptr error;
    };
    auto state = std::make_shared<State>();  // done may outlive this call if fn throws after handing it out
    KernelThreadsScope threads(kernel_threads_);
    try {
      fn([state](std::exception_ptr e) {
        std::lock_guard<std::mutex> state_lock(state->mu);
        state->error = e;
        state->finished = true;
        state->cv.notify_all();
      });
    } catch (...) {
      error_ = NamedError(opts.name, std::current_exception());
      return;
    }
    std::unique_lock<std::mutex> state_lock(state->mu);
    state->cv.wait(state_lock, [&] { return state->finished; });
    if (state->error) error_ = NamedError(opts.name, state->error);
  }

  void WaitForVar(Var) override { Rethrow(); }
  void WaitAll() override { Rethrow(); }
  int KernelThreads(Device) const override { return kernel_threads_ > 0 ? kernel_threads_ : cpu::KernelThreads(); }
  const char* name() const override { return "naive"; }
  std::string Describe() const override {
    return Fmt("naive (each function runs at push time on the calling thread; kernels use ", KernelThreads(Device{}),
               " threads)");
  }

 private:
  void Rethrow() {
    if (!error_) return;
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  const int kernel_threads_;  // 0: the caller's
  Var next_var_ = 0;
  std::exception_ptr error_;
};

}  // namespace

std::unique_ptr<Engine> MakeNaiveEngine(const EngineOptions& opts) {
  return std::make_unique<NaiveEngine>(opts.kernel_threads);
}

}  // namespace frugal::engine_internal
