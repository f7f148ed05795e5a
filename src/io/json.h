// A small strict JSON reader for the files frugal imports (MXNet's symbol
// JSON): objects, arrays, strings with escapes (\uXXXX as UTF-8), numbers,
// true, false, null. Every value remembers its line and column, so a
// reader of the document can name where a wrong value is; a syntax error is
// an Error "FILE:LINE:COL: what was expected". Nesting is bounded (a hostile
// file cannot overflow the stack).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace frugal {

struct JsonValue {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;  // a key given twice is a syntax error
  int line = 0, col = 0;

  // The member `key` of an object, or nullptr (also when this is no object).
  const JsonValue* Find(const std::string& key) const;
  bool Has(const std::string& key) const { return Find(key) != nullptr; }
  // The member `key` of an object; throws Error naming the key and where
  // this value starts when there is none.
  const JsonValue& operator[](const std::string& key) const;
  // "an object", "a string", ... for messages.
  static const char* KindName(Kind k);
  const char* KindName() const { return KindName(kind); }
};

// Parses text read from `path` (used in messages). Throws Error.
JsonValue ParseJson(const std::string& text, const std::string& path);

}  // namespace frugal
