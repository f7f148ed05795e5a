// The strict JSON reader of src/io/json.h: recursive descent over the text,
// positions turned into line:column through a table of line starts.
#include "io/json.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "frugal/base.h"

namespace frugal {
namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  Parser(const std::string& text, const std::string& path) : s_(text), path_(path) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  JsonValue Document() {
    JsonValue v = Value(0);
    Space();
    if (i_ != s_.size()) Fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    auto [line, col] = Position(i_);
    // What is there, up to 12 characters of its line.
    const std::string excerpt = s_.substr(i_, std::min(s_.find_first_of("\r\n", i_), i_ + 12) - i_);
    const std::string got = i_ < s_.size() ? Fmt("'", excerpt, "'") : std::string("the end of the file");
    throw Error(Fmt(path_, ":", line, ":", col, ": ", what, ", got ", got, " (is the file complete JSON?)"));
  }

  std::pair<int, int> Position(size_t pos) const {
    const size_t line = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - line_starts_.begin();
    return {static_cast<int>(line), static_cast<int>(pos - line_starts_[line - 1] + 1)};
  }

  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  void Expect(char c, const char* what) {
    if (!Eat(c)) Fail(Fmt("expected ", what));
  }

  JsonValue Value(int depth) {
    Space();
    if (depth > kMaxDepth) Fail(Fmt("values nested more than ", kMaxDepth, " deep"));
    JsonValue v;
    std::tie(v.line, v.col) = Position(i_);
    if (i_ >= s_.size()) Fail("expected a value");
    const char c = s_[i_];
    if (c == '{') {
      Object(&v, depth);
    } else if (c == '[') {
      Array(&v, depth);
    } else if (c == '"') {
      v.kind = JsonValue::kString;
      v.str = String();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::kNumber;
      v.num = Number();
    } else {
      Word(&v);
    }
    return v;
  }

  void Object(JsonValue* v, int depth) {
    v->kind = JsonValue::kObject;
    ++i_;
    if (Eat('}')) return;
    do {
      Space();
      if (i_ >= s_.size() || s_[i_] != '"') Fail("expected a key in quotes");
      const size_t at = i_;
      std::string key = String();
      Expect(':', "':' after the key");
      JsonValue member = Value(depth + 1);
      if (!v->object.emplace(key, std::move(member)).second) {
        i_ = at;
        Fail(Fmt("the key '", key, "' is given twice in this object"));
      }
    } while (Eat(','));
    Expect('}', "',' or '}' in the object");
  }

  void Array(JsonValue* v, int depth) {
    v->kind = JsonValue::kArray;
    ++i_;
    if (Eat(']')) return;
    do { v->array.push_back(Value(depth + 1)); } while (Eat(','));
    Expect(']', "',' or ']' in the array");
  }

  void Word(JsonValue* v) {
    for (const char* w : {"true", "false", "null"}) {
      if (s_.compare(i_, std::char_traits<char>::length(w), w) != 0) continue;
      i_ += std::char_traits<char>::length(w);
      v->kind = w[0] == 'n' ? JsonValue::kNull : JsonValue::kBool;
      v->b = w[0] == 't';
      return;
    }
    Fail("expected a value (an object, array, string, number, true, false or null)");
  }

  double Number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == from) Fail("expected a digit");
    };
    if (s_[i_] == '-') ++i_;
    digits();
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    return std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
  }

  std::string String() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) Fail("expected the closing '\"' of a string");
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') break;
      if (c < 0x20) Fail("expected no control character inside a string (write \\n, \\t)");
      ++i_;
      if (c == '\\') {
        Escape(&out);
      } else {
        out += static_cast<char>(c);
      }
    }
    ++i_;
    return out;
  }

  void Escape(std::string* out) {
    if (i_ >= s_.size()) Fail("expected an escape after '\\'");
    const char e = s_[i_++];
    static const std::string kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
    const size_t k = kFrom.find(e);
    if (k != std::string::npos) {
      *out += kTo[k];
    } else if (e == 'u') {
      AppendUtf8(Hex4(), out);
    } else {
      --i_;
      Fail("expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
    }
  }

  unsigned Hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char h = i_ < s_.size() ? s_[i_] : '\0';
      const char lower = static_cast<char>(h | 0x20);
      const int d = h >= '0' && h <= '9' ? h - '0' : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
      if (d < 0) Fail("expected four hex digits after \\u");
      v = v * 16 + static_cast<unsigned>(d);
    }
    return v;
  }

  // Code units of the basic plane as UTF-8 (a surrogate half is kept as its
  // own three bytes: names in model files never need more).
  static void AppendUtf8(unsigned u, std::string* out) {
    if (u < 0x80) {
      *out += static_cast<char>(u);
    } else if (u < 0x800) {
      *out += static_cast<char>(0xC0 | (u >> 6));
      *out += static_cast<char>(0x80 | (u & 0x3F));
    } else {
      *out += static_cast<char>(0xE0 | (u >> 12));
      *out += static_cast<char>(0x80 | ((u >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (u & 0x3F));
    }
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
  std::vector<size_t> line_starts_;
};

}  // namespace

const JsonValue* JsonValue::Find(const std::string& key) const {
  if (kind != kObject) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

const JsonValue& JsonValue::operator[](const std::string& key) const {
  const JsonValue* v = Find(key);
  FRUGAL_REQUIRE(v, "line ", line, ", column ", col, ": ", KindName(), " without the member '", key, "'");
  return *v;
}

const char* JsonValue::KindName(Kind k) {
  static const char* names[] = {"null", "true or false", "a number", "a string", "an array", "an object"};
  return names[k];
}

JsonValue ParseJson(const std::string& text, const std::string& path) { return Parser(text, path).Document(); }

}  // namespace frugal
