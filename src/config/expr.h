// Integer arithmetic in configs: "$(expr)" with + - * / %, comparisons
// (< <= > >= == != give 1 or 0), c ? a : b, and parentheses, e.g.
// "$(${depth} >= 200 ? (${depth} - 2) / 3 - 30 : 36)" once ${depth} is substituted.
#pragma once

#include <cstdint>
#include <string>

namespace frugal {

// Evaluates one expression; throws Error "<where>: ..." on bad syntax or
// division by zero.
int64_t EvalExpr(const std::string& expr, const std::string& where);

// Replaces every $(...) in text by its value, except expressions that use
// block arguments (@{...}), which wait for block expansion. `where` names the
// text in errors.
std::string ExpandExprs(const std::string& text, const std::string& where);

}  // namespace frugal
