// A recursive-descent evaluator for integer expressions in int64, every
// operation checked (an overflow is an error, never a wrapped value), nested
// at most kMaxDepth deep:
//   cond   := cmp ('?' cond ':' cond)?
//   cmp    := expr (('<' | '<=' | '>' | '>=' | '==' | '!=') expr)?     (1 or 0)
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/' | '%') factor)*
//   factor := integer | '-' factor | '(' expr ')'
#include "config/expr.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "frugal/base.h"

namespace frugal {
namespace {

constexpr int kMaxDepth = 200;  // parentheses and conditionals: a bound on the recursion

class Parser {
 public:
  Parser(const std::string& s, const std::string& where) : s_(s), where_(where) {}

  int64_t Parse() {
    int64_t v = Cond();
    Skip();
    if (pos_ != s_.size()) Fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return v;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  [[noreturn]] void Fail(const std::string& what) const {
    const std::string shown = s_.size() > 80 ? s_.substr(0, 77) + "..." : s_;
    throw Error(Fmt(where_, ": in $(", shown, "): ", what,
                    " (write integer arithmetic: + - * / %, comparisons, c ? a : b, parentheses)"));
  }
  // Every result passes through Checked (its overflow test made before the
  // call: argument order is unspecified): an overflow names the operation.
  int64_t Checked(bool overflow, int64_t a, const char* op, int64_t b, int64_t result) const {
    if (overflow) Fail(Fmt(a, " ", op, " ", b, " overflows a 64-bit integer"));
    return result;
  }
  // Held by every rule that recurses (a conditional, a parenthesis, a sign).
  class Deeper {
   public:
    explicit Deeper(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxDepth) p_->Fail(Fmt("nested more than ", kMaxDepth, " deep"));
    }
    ~Deeper() { --p_->depth_; }

   private:
    Parser* p_;
  };

  int64_t Cond() {
    Deeper deeper(this);
    int64_t c = Cmp();
    if (!Eat('?')) return c;
    int64_t a = Cond();
    if (!Eat(':')) Fail("missing ':' after '?'");
    int64_t b = Cond();
    return c ? a : b;
  }
  int64_t Cmp() {
    int64_t a = Expr();
    Skip();
    const char* ops[] = {"<=", ">=", "==", "!=", "<", ">"};
    for (const char* op : ops) {
      if (s_.compare(pos_, std::strlen(op), op) != 0) continue;
      pos_ += std::strlen(op);
      int64_t b = Expr();
      std::string o = op;
      return o == "<="   ? a <= b
             : o == ">=" ? a >= b
             : o == "==" ? a == b
             : o == "!=" ? a != b
             : o == "<"  ? a < b
                         : a > b;
    }
    return a;
  }
  int64_t Expr() {
    int64_t v = Term();
    while (true) {
      int64_t r = 0;
      if (Eat('+')) {
        const int64_t b = Term();
        const bool overflow = __builtin_add_overflow(v, b, &r);
        v = Checked(overflow, v, "+", b, r);
      } else if (Eat('-')) {
        const int64_t b = Term();
        const bool overflow = __builtin_sub_overflow(v, b, &r);
        v = Checked(overflow, v, "-", b, r);
      } else {
        return v;
      }
    }
  }
  int64_t Term() {
    int64_t v = Factor();
    while (true) {
      if (Eat('*')) {
        const int64_t b = Factor();
        int64_t r = 0;
        const bool overflow = __builtin_mul_overflow(v, b, &r);
        v = Checked(overflow, v, "*", b, r);
        continue;
      }
      bool div = Eat('/');
      if (!div && !Eat('%')) return v;
      int64_t d = Factor();
      if (d == 0) Fail("division by zero");
      const bool overflow = v == INT64_MIN && d == -1;  // the one quotient int64 cannot hold (SIGFPE)
      v = Checked(overflow, v, div ? "/" : "%", d, overflow ? 0 : div ? v / d : v % d);
    }
  }
  int64_t Factor() {
    Deeper deeper(this);
    if (Eat('-')) {
      const int64_t v = Factor();
      return Checked(v == INT64_MIN, 0, "-", v, v == INT64_MIN ? 0 : -v);
    }
    if (Eat('(')) {
      int64_t v = Cond();
      if (!Eat(')')) Fail("missing ')'");
      return v;
    }
    Skip();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_)
      Fail(pos_ < s_.size() ? "expected a number at '" + s_.substr(pos_, 1) + "'" : "expected a number");
    const std::string digits = s_.substr(start, pos_ - start);
    errno = 0;
    const int64_t v = std::strtoll(digits.c_str(), nullptr, 10);
    if (errno == ERANGE) Fail(Fmt(digits, " is more than a 64-bit integer holds (at most ", INT64_MAX, ")"));
    return v;
  }

  const std::string& s_;
  const std::string& where_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

int64_t EvalExpr(const std::string& expr, const std::string& where) { return Parser(expr, where).Parse(); }

namespace {

std::string Expand(const std::string& text, const std::string& where, int nesting) {
  FRUGAL_REQUIRE(nesting <= kMaxDepth, where, ": $(...) nested more than ", kMaxDepth, " deep");
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("$(", pos);
    if (open == std::string::npos) break;
    int depth = 0;
    size_t close = open + 1;
    for (; close < text.size(); ++close) {
      if (text[close] == '(') ++depth;
      if (text[close] == ')' && --depth == 0) break;
      if (text[close] == '\n') close = text.size() - 1;  // expressions stay on one line
    }
    FRUGAL_REQUIRE(close < text.size() && text[close] == ')', where, ": '$(' without a closing ')' on the same line");
    out.append(text, pos, open - pos);
    std::string expr = text.substr(open + 2, close - open - 2);
    if (expr.find("@{") != std::string::npos) {  // (checked before the inner ones are evaluated)
      out.append(text, open, close + 1 - open);  // needs block arguments: evaluated at expansion
    } else {
      out += std::to_string(EvalExpr(Expand(expr, where, nesting + 1), where));  // inner $(...) first
    }
    pos = close + 1;
  }
  return out.append(text, pos, std::string::npos);
}

}  // namespace

std::string ExpandExprs(const std::string& text, const std::string& where) { return Expand(text, where, 0); }

}  // namespace frugal
