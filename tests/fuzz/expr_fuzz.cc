// libFuzzer target: the config language's integer expressions. EvalExpr and
// ExpandExprs on arbitrary text must return or throw frugal::Error, never
// crash, overflow (UBSan stops on signed overflow) or recurse off the stack.
// A value that comes back must print and parse back to itself.
#include <cstdlib>
#include <string>

#include "config/expr.h"
#include "frugal/base.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const int64_t v = frugal::EvalExpr(text, "fuzz");
    if (v != INT64_MIN && frugal::EvalExpr(std::to_string(v), "fuzz") != v) std::abort();
  } catch (const frugal::Error&) {}
  try {
    frugal::ExpandExprs(text, "fuzz");
  } catch (const frugal::Error&) {}
  return 0;
}
