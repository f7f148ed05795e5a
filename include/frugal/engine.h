// The engine: ops, data preparation and parameter updates are pushed as
// functions with the variables they read and write, MXNet-style. Semantics
// per variable: reads pushed together may run together; a write waits for
// every earlier read and write; later reads wait for that write.
//
// The naive engine runs each function at push time, in push order; it is the
// reference for debugging and determinism. A threaded engine implements the
// same interface.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/base.h"

namespace frugal {

using Var = int64_t;  // an engine variable; created by NewVar

struct PushOptions {
  Device device;
  int priority = 0;
  const char* name = "";  // shown in errors and traces
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual Var NewVar() = 0;
  // Waits for the variable's pending work, then forgets it.
  virtual void DeleteVar(Var v) = 0;
  virtual void Push(std::function<void()> fn, const std::vector<Var>& reads,
                    const std::vector<Var>& writes, const PushOptions& opts) = 0;
  // Blocks until every pushed function that writes v has run; rethrows the
  // first error raised by a function pushed so far.
  virtual void WaitForVar(Var v) = 0;
  virtual void WaitAll() = 0;
  virtual const char* name() const = 0;
};

// Makes an engine by name ("naive"); throws Error for an unknown name.
std::unique_ptr<Engine> MakeEngine(const std::string& name);

}  // namespace frugal
