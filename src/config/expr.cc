// A recursive-descent evaluator for integer expressions:
//   cond   := cmp ('?' cond ':' cond)?
//   cmp    := expr (('<' | '<=' | '>' | '>=' | '==' | '!=') expr)?     (1 or 0)
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/' | '%') factor)*
//   factor := integer | '-' factor | '(' expr ')'
#include "config/expr.h"

#include <cctype>
#include <cstring>

#include "frugal/base.h"

namespace frugal {
namespace {

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
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(Fmt(where_, ": in $(", s_, "): ", what, " (write integer arithmetic: + - * / %, comparisons, c ? a : b, parentheses)"));
  }
  int64_t Cond() {
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
      return o == "<=" ? a <= b : o == ">=" ? a >= b : o == "==" ? a == b : o == "!=" ? a != b : o == "<" ? a < b : a > b;
    }
    return a;
  }
  int64_t Expr() {
    int64_t v = Term();
    while (true) {
      if (Eat('+')) v += Term();
      else if (Eat('-')) v -= Term();
      else return v;
    }
  }
  int64_t Term() {
    int64_t v = Factor();
    while (true) {
      if (Eat('*')) { v *= Factor(); continue; }
      bool div = Eat('/');
      if (!div && !Eat('%')) return v;
      int64_t d = Factor();
      if (d == 0) Fail("division by zero");
      v = div ? v / d : v % d;
    }
  }
  int64_t Factor() {
    if (Eat('-')) return -Factor();
    if (Eat('(')) {
      int64_t v = Cond();
      if (!Eat(')')) Fail("missing ')'");
      return v;
    }
    Skip();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_) Fail(pos_ < s_.size() ? "expected a number at '" + s_.substr(pos_, 1) + "'" : "expected a number");
    return std::stoll(s_.substr(start, pos_ - start));
  }

  const std::string& s_;
  const std::string& where_;
  size_t pos_ = 0;
};

}  // namespace

int64_t EvalExpr(const std::string& expr, const std::string& where) { return Parser(expr, where).Parse(); }

std::string ExpandExprs(const std::string& text, const std::string& where) {
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
      out += std::to_string(EvalExpr(ExpandExprs(expr, where), where));  // inner $(...) first
    }
    pos = close + 1;
  }
  return out.append(text, pos, std::string::npos);
}

}  // namespace frugal
