// The naive engine: runs each pushed function at once, in push order. Any
// order a threaded engine may choose is equivalent to this one, so this is
// the reference that other engines are tested against.
#include <exception>

#include "frugal/engine.h"

namespace frugal {
namespace {

class NaiveEngine : public Engine {
 public:
  Var NewVar() override { return next_var_++; }
  void DeleteVar(Var) override {}
  void Push(std::function<void()> fn, const std::vector<Var>&, const std::vector<Var>&,
            const PushOptions& opts) override {
    if (error_) return;  // after a failure, nothing more runs until the wait reports it
    try {
      fn();
    } catch (const Error& e) {
      error_ = std::make_exception_ptr(Error(Fmt(opts.name, ": ", e.what())));
    } catch (const std::exception& e) {
      error_ = std::make_exception_ptr(Error(Fmt(opts.name, ": ", e.what())));
    }
  }
  void WaitForVar(Var) override { Rethrow(); }
  void WaitAll() override { Rethrow(); }
  const char* name() const override { return "naive"; }

 private:
  void Rethrow() {
    if (!error_) return;
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  Var next_var_ = 0;
  std::exception_ptr error_;
};

}  // namespace

std::unique_ptr<Engine> MakeEngine(const std::string& name) {
  if (name == "naive") return std::make_unique<NaiveEngine>();
  throw Error(Fmt("unknown engine '", name, "' (built: naive)"));
}

}  // namespace frugal
