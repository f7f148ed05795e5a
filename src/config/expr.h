// Integer arithmetic in configs: "$(expr)" with + - * / % and parentheses,
// e.g. "$((${depth} - 2) / 3 - 30)" once ${depth} is substituted.
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
