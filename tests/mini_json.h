// A strict little JSON parser for tests that check what frugal writes
// (traces, logs): objects, arrays, strings with escapes, numbers, true,
// false, null. Throws std::runtime_error with the offset on invalid input.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace frugal::test {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  const Json& operator[](const std::string& key) const {
    auto it = object.find(key);
    if (kind != kObject || it == object.end()) throw std::runtime_error("no key '" + key + "'");
    return it->second;
  }
  bool Has(const std::string& key) const { return kind == kObject && object.count(key); }
};

class JsonParser {
 public:
  static Json Parse(const std::string& text) {
    JsonParser p(text);
    Json v = p.Value();
    p.Space();
    if (p.i_ != text.size()) p.Fail("trailing characters");
    return v;
  }

 private:
  explicit JsonParser(const std::string& t) : t_(t) {}
  [[noreturn]] void Fail(const std::string& what) {
    throw std::runtime_error("invalid JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void Space() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  void Expect(char c) {
    Space();
    if (i_ >= t_.size() || t_[i_] != c) Fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool Word(const char* w) {
    std::string s(w);
    if (t_.compare(i_, s.size(), s) != 0) return false;
    i_ += s.size();
    return true;
  }
  Json Value() {
    Space();
    if (i_ >= t_.size()) Fail("unexpected end");
    Json v;
    char c = t_[i_];
    if (c == '{') {
      v.kind = Json::kObject;
      ++i_;
      Space();
      if (t_[i_] == '}') { ++i_; return v; }
      for (;;) {
        Space();
        std::string key = String();
        Expect(':');
        if (!v.object.emplace(key, Value()).second) Fail("duplicate key " + key);
        Space();
        if (i_ < t_.size() && t_[i_] == ',') { ++i_; continue; }
        Expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::kArray;
      ++i_;
      Space();
      if (t_[i_] == ']') { ++i_; return v; }
      for (;;) {
        v.array.push_back(Value());
        Space();
        if (i_ < t_.size() && t_[i_] == ',') { ++i_; continue; }
        Expect(']');
        return v;
      }
    }
    if (c == '"') { v.kind = Json::kString; v.str = String(); return v; }
    if (Word("true")) { v.kind = Json::kBool; v.b = true; return v; }
    if (Word("false")) { v.kind = Json::kBool; return v; }
    if (Word("null")) return v;
    size_t start = i_;
    if (t_[i_] == '-') ++i_;
    if (i_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[i_]))) Fail("bad value");
    while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.' || t_[i_] == 'e' ||
                              t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-'))
      ++i_;
    char* end = nullptr;
    std::string num = t_.substr(start, i_ - start);
    v.kind = Json::kNumber;
    v.num = std::strtod(num.c_str(), &end);
    if (*end != '\0') Fail("bad number " + num);
    return v;
  }
  std::string String() {
    if (i_ >= t_.size() || t_[i_] != '"') Fail("expected a string");
    ++i_;
    std::string s;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
      if (c != '\\') { s += c; continue; }
      if (i_ >= t_.size()) Fail("unfinished escape");
      char e = t_[i_++];
      switch (e) {
        case '"': case '\\': case '/': s += e; break;
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'u': {
          if (i_ + 4 > t_.size()) Fail("short \\u escape");
          long cp = std::strtol(t_.substr(i_, 4).c_str(), nullptr, 16);
          i_ += 4;
          if (cp >= 0x80) Fail("non-ASCII \\u escapes are not needed by these tests");
          s += static_cast<char>(cp);
          break;
        }
        default: Fail("bad escape");
      }
    }
    if (i_ >= t_.size()) Fail("unterminated string");
    ++i_;
    return s;
  }
  const std::string& t_;
  size_t i_ = 0;
};

}  // namespace frugal::test
