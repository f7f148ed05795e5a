// MXNet's symbol JSON (format in include/frugal/mxnet.h) read into
// MxnetSymbol: every node's op, name, attributes and inputs checked for
// their types and for inputs that name earlier nodes, each error naming the
// file, the line and the node.
#include <cmath>
#include <fstream>
#include <sstream>

#include "frugal/mxnet.h"
#include "io/json.h"

namespace frugal {
namespace {

std::string At(const std::string& path, const JsonValue& v) { return Fmt(path, ":", v.line, ":", v.col); }

const JsonValue& Member(const JsonValue& obj, const std::string& key, JsonValue::Kind kind, const std::string& where,
                        const std::string& path) {
  const JsonValue* v = obj.Find(key);
  FRUGAL_REQUIRE(v, At(path, obj), ": ", where, " has no \"", key, "\" (is this an MXNet symbol file?)");
  FRUGAL_REQUIRE(v->kind == kind, At(path, *v), ": ", where, ": \"", key, "\" is ", v->KindName(), ", expected ",
                 JsonValue::KindName(kind));
  return *v;
}

int64_t WholeNumber(const JsonValue& v, int64_t limit, const std::string& what, const std::string& path) {
  FRUGAL_REQUIRE(
      v.kind == JsonValue::kNumber && v.num >= 0 && v.num < static_cast<double>(limit) && v.num == std::floor(v.num),
      At(path, v), ": ", what, " must be a whole number below ", limit, ", got ",
      v.kind == JsonValue::kNumber ? Fmt(v.num) : std::string(v.KindName()));
  return static_cast<int64_t>(v.num);
}

// [node, output] or [node, output, version]; node below `limit`.
MxnetNode::Input EntryRef(const JsonValue& v, int limit, const std::string& what, const std::string& path) {
  FRUGAL_REQUIRE(v.kind == JsonValue::kArray && (v.array.size() == 2 || v.array.size() == 3), At(path, v), ": ", what,
                 " must be [node, output, version], got ", v.KindName(),
                 v.kind == JsonValue::kArray ? Fmt(" of ", v.array.size()) : "");
  MxnetNode::Input in;
  in.node = static_cast<int>(WholeNumber(v.array[0], limit, what + "'s node (an earlier node's index)", path));
  in.index = static_cast<int>(WholeNumber(v.array[1], 1 << 20, what + "'s output", path));
  return in;
}

// "attrs" (MXNet 1.x), "attr" (0.9) and "param" (0.8) hold the attributes.
void ReadAttrs(const JsonValue& node, const std::string& where, const std::string& path, MxnetNode* out) {
  for (const char* key : {"param", "attr", "attrs"}) {
    const JsonValue* attrs = node.Find(key);
    if (!attrs) continue;
    FRUGAL_REQUIRE(attrs->kind == JsonValue::kObject, At(path, *attrs), ": ", where, ": \"", key, "\" is ",
                   attrs->KindName(), ", expected an object of strings");
    for (const auto& [k, v] : attrs->object) {
      FRUGAL_REQUIRE(v.kind == JsonValue::kString, At(path, v), ": ", where, ": attribute '", k, "' is ", v.KindName(),
                     "; MXNet writes attribute values as strings, e.g. \"(3, 3)\"");
      out->attrs[k] = v.str;
    }
  }
}

MxnetNode ReadNode(const JsonValue& v, int k, const std::string& path) {
  const std::string where = Fmt("node ", k);
  FRUGAL_REQUIRE(v.kind == JsonValue::kObject, At(path, v), ": ", where, " is ", v.KindName(), ", expected an object");
  MxnetNode n;
  n.line = v.line;
  n.op = Member(v, "op", JsonValue::kString, where, path).str;
  n.name = Member(v, "name", JsonValue::kString, where, path).str;
  const std::string named = Fmt(where, " '", n.name, "' (", n.op, ")");
  ReadAttrs(v, named, path, &n);
  const JsonValue* inputs = v.Find("inputs");
  if (!inputs) return n;
  FRUGAL_REQUIRE(inputs->kind == JsonValue::kArray, At(path, *inputs), ": ", named, ": \"inputs\" is ",
                 inputs->KindName(), ", expected an array");
  for (size_t i = 0; i < inputs->array.size(); ++i)
    n.inputs.push_back(EntryRef(inputs->array[i], k, Fmt(named, ": input ", i), path));
  return n;
}

}  // namespace

MxnetSymbol ParseMxnetSymbol(const std::string& text, const std::string& path) {
  const JsonValue doc = ParseJson(text, path);
  FRUGAL_REQUIRE(doc.kind == JsonValue::kObject, At(path, doc), ": the file holds ", doc.KindName(),
                 ", not an MXNet symbol (an object with \"nodes\" and \"heads\")");
  MxnetSymbol sym;
  sym.path = path;
  const JsonValue& nodes = Member(doc, "nodes", JsonValue::kArray, "the symbol", path);
  for (size_t k = 0; k < nodes.array.size(); ++k)
    sym.nodes.push_back(ReadNode(nodes.array[k], static_cast<int>(k), path));
  const JsonValue& heads = Member(doc, "heads", JsonValue::kArray, "the symbol", path);
  FRUGAL_REQUIRE(!heads.array.empty(), At(path, heads), ": the symbol has no heads (outputs)");
  for (size_t i = 0; i < heads.array.size(); ++i)
    sym.heads.push_back(EntryRef(heads.array[i], static_cast<int>(sym.nodes.size()), Fmt("head ", i), path));
  const JsonValue* attrs = doc.Find("attrs");
  const JsonValue* version = attrs ? attrs->Find("mxnet_version") : nullptr;
  // ["int", 10500]
  if (version && version->kind == JsonValue::kArray && version->array.size() == 2 &&
      version->array[1].kind == JsonValue::kNumber)
    sym.mxnet_version = static_cast<int64_t>(version->array[1].num);
  return sym;
}

MxnetSymbol ReadMxnetSymbol(const std::string& path) {
  return ParseMxnetSymbol(ReadFileBytes(path, "MXNet symbol"), path);
}

}  // namespace frugal
