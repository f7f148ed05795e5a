// The engine: ops, data preparation and parameter updates are pushed as
// functions with the variables they read and write, MXNet-style. An engine
// variable stands for a piece of state (a tensor, an arena block, a data
// iterator); it holds no data itself.
//
// Semantics per variable, in push order:
//   - reads pushed one after another may run together;
//   - a write waits for every earlier read and write of the variable;
//   - a read waits for every earlier write.
// A function runs once every variable it names allows it. A variable named
// twice (or both read and written) by one function counts once, as a write.
// Any order that respects these rules gives the same result as running the
// functions one by one in push order, which is what the naive engine does.
//
// Errors: an exception thrown by a function (or reported by an asynchronous
// one) is kept, prefixed with the function's name ("fc1: ..."), and rethrown
// as frugal::Error by the next WaitForVar or WaitAll. Only the first error is
// kept. Every function pushed before that wait returns which had not started
// when the error happened is skipped (its variables are released as if it had
// run), as with the naive engine, where nothing pushed after a failure runs
// until a wait reports it. Functions pushed after the wait run normally.
// Worker threads survive errors.
//
// Functions must not call WaitForVar or WaitAll (they may Push).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/base.h"

namespace frugal {

using Var = int64_t;  // an engine variable; created by NewVar

// Which workers run a function.
enum class FnKind : uint8_t {
  kCompute,  // kernels, updates, metrics: the worker pool of opts.device
  kIO,       // data loading and prefetch: the engine's dedicated I/O thread
};

struct PushOptions {
  Device device;     // CPU: the CPU worker pool; another device: its own worker (a stream)
  int priority = 0;  // among ready functions of one pool, higher runs first
  FnKind kind = FnKind::kCompute;
  // Shown in errors. Must stay valid until the function has run (a literal,
  // or a node's name in a graph that outlives the run).
  const char* name = "";
};

// Reports the end of an asynchronous function's work: call it exactly once,
// from any thread, with nullptr on success or the exception that failed it.
using Done = std::function<void(std::exception_ptr error)>;
// A function that starts work which finishes later (a CUDA stream callback,
// a communication request) and then calls done.
using AsyncFn = std::function<void(Done done)>;

// How an engine spends the CPU cores. The naive engine runs everything on
// the caller's thread and honours only kernel_threads (0: every core).
// Kernels give the same bits on both engines at equal kernel threads (BLAS
// results may depend on its thread count).
struct EngineOptions {
  int cpu_workers = 0;     // threads running CPU functions; 0: min(2, cores) (MakeEngineFor chooses per graph)
  int kernel_threads = 0;  // threads one kernel may use; 0: cores / cpu_workers (at least 1)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual Var NewVar() = 0;
  // Forgets v once its pending work has run (without blocking the caller).
  // v must not be named by a later push.
  virtual void DeleteVar(Var v) = 0;
  virtual void Push(std::function<void()> fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                    const PushOptions& opts) = 0;
  // Like Push, but the variables are released only when fn's done is called.
  virtual void PushAsync(AsyncFn fn, const std::vector<Var>& reads, const std::vector<Var>& writes,
                         const PushOptions& opts) = 0;
  // Blocks until every function pushed so far that writes v has finished;
  // then rethrows the first error raised since the last wait, if any.
  virtual void WaitForVar(Var v) = 0;
  // Blocks until every function pushed so far has finished; then rethrows
  // the first error raised since the last wait, if any.
  virtual void WaitAll() = 0;
  // Threads a kernel running on this engine may use (its OpenMP team): the
  // engine's workers times this never exceeds the cores it was given.
  virtual int KernelThreads(Device dev) const = 0;
  virtual const char* name() const = 0;
  // One line for the start-up log: "threaded (cpu: 2 workers x 1 kernel thread, io: 1 thread; 2 cores)".
  virtual std::string Describe() const = 0;
};

// Makes an engine by name: "naive" or "threaded". Throws Error for an
// unknown name or bad options.
std::unique_ptr<Engine> MakeEngine(const std::string& name, const EngineOptions& opts = {});

// WaitAll for destructors and error paths: waits, and returns the error
// message that WaitAll would have thrown ("" if none) instead of throwing.
std::string WaitAllNoThrow(Engine* engine);

}  // namespace frugal
