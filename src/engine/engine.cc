// Choosing an engine by name, and the error handling both engines share.
#include <string>

#include "engine/engine_internal.h"

namespace frugal {
namespace engine_internal {

std::exception_ptr NamedError(const char* name, std::exception_ptr thrown) {
  std::string what;
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) { what = e.what(); } catch (...) {
    what = "unknown exception";
  }
  return std::make_exception_ptr(Error(Fmt(name && *name ? name : "(unnamed function)", ": ", what)));
}

}  // namespace engine_internal

std::unique_ptr<Engine> MakeEngine(const std::string& name, const EngineOptions& opts) {
  FRUGAL_REQUIRE(opts.cpu_workers >= 0 && opts.kernel_threads >= 0, "engine options: cpu_workers (", opts.cpu_workers,
                 ") and kernel_threads (", opts.kernel_threads, ") must be >= 0 (0 chooses from the cores)");
  if (name == "naive") return engine_internal::MakeNaiveEngine(opts);
  if (name == "threaded") return engine_internal::MakeThreadedEngine(opts);
  throw Error(Fmt("unknown engine '", name, "' (built: naive, threaded)"));
}

std::string WaitAllNoThrow(Engine* engine) {
  try {
    engine->WaitAll();
  } catch (const std::exception& e) { return e.what(); }
  return "";
}

}  // namespace frugal
