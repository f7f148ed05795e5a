// Pieces shared by the engines (not part of the public API).
#pragma once

#include <exception>
#include <memory>

#include "frugal/engine.h"

namespace frugal::engine_internal {

// The error a failed function reports at the next wait: "name: what" as a
// frugal::Error, whatever the function threw.
std::exception_ptr NamedError(const char* name, std::exception_ptr thrown);

std::unique_ptr<Engine> MakeNaiveEngine(const EngineOptions& opts);
std::unique_ptr<Engine> MakeThreadedEngine(const EngineOptions& opts);

}  // namespace frugal::engine_internal
