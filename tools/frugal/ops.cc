// frugal ops: every registered op with what it declares: inputs (and which
// a config may leave out), outputs, devices with kernels, in-place pairs,
// inputs it updates, recompute class, randomness, and how its gradient is
// made. Forward ops first, then the backward ops (names starting with '_'),
// which configs never name.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "frugal/op.h"

DECLARE_bool(json);

namespace frugal::cli {
namespace {

std::string JsonStr(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += Fmt("\\u00", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    else
      out += c;
  }
  return out + "\"";
}

const char* KindName(VarKind k) {
  switch (k) {
    case VarKind::kParam: return "param";
    case VarKind::kAux: return "aux";
    default: return "";
  }
}

std::vector<std::string> Devices(const OpDef& op) {
  std::vector<std::string> d;
  if (op.cpu_kernel()) d.push_back("cpu");
  if (op.cuda_kernel()) d.push_back("cuda");
  return d;
}

// "_backward_relu" (one backward op), "ops" (a gradient built from ops),
// "none" (no gradient: backward ops themselves, or none by design).
std::string GradientOf(const OpDef& op) {
  if (!op.has_gradient()) return "none";
  return op.backward_op().empty() ? "ops" : op.backward_op();
}

std::string Joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string Json(const OpDef& op) {
  std::string in, out, inplace, mutates;
  for (const InputSpec& s : op.inputs()) {
    in += (in.empty() ? "" : ",") + Fmt("{\"name\":", JsonStr(s.name));
    if (s.made_as != VarKind::kNone) in += Fmt(",\"made_as\":\"", KindName(s.made_as), "\",\"init\":", JsonStr(s.init));
    in += "}";
  }
  for (const auto& o : op.outputs()) out += (out.empty() ? "" : ",") + JsonStr(o);
  for (const auto& [i, o] : op.inplace()) inplace += Fmt(inplace.empty() ? "" : ",", "[", i, ",", o, "]");
  for (int i : op.mutates()) mutates += Fmt(mutates.empty() ? "" : ",", i);
  if (op.mutates_all()) mutates = "\"all\"";
  std::string devices;
  for (const auto& d : Devices(op)) devices += (devices.empty() ? "" : ",") + JsonStr(d);
  return Fmt("{\"name\":", JsonStr(op.name()), ",\"backward\":", op.name()[0] == '_' ? "true" : "false",
             ",\"doc\":", JsonStr(op.doc()), ",\"inputs\":[", in, "],\"outputs\":[", out, "],\"devices\":[", devices,
             "],\"inplace\":[", inplace, "],\"mutates\":[", mutates, "],\"recompute\":\"", CostName(op.cost()),
             "\",\"random\":", op.randomness() == Randomness::kCounterRng ? "true" : "false",
             ",\"loss\":", op.is_loss() ? "true" : "false", ",\"gradient\":", JsonStr(GradientOf(op)), "}");
}

std::string Text(const OpDef& op) {
  std::vector<std::string> in, inplace, mutates;
  for (const InputSpec& s : op.inputs())
    in.push_back(s.made_as == VarKind::kNone ? s.name : Fmt(s.name, "(", KindName(s.made_as), ",", s.init, ")"));
  for (const auto& [i, o] : op.inplace()) {
    const auto& ins = op.inputs();
    std::string x = ins.empty() ? Fmt(i) : ins[std::min<size_t>(i, ins.size() - 1)].name;
    std::string y = o < static_cast<int>(op.outputs().size()) ? op.outputs()[o] : Fmt(o);
    inplace.push_back(x + "->" + y);
  }
  for (int i : op.mutates()) mutates.push_back(Fmt(i));
  if (op.mutates_all()) mutates.push_back("all");
  std::string devices = Joined(Devices(op), ",");
  return Fmt(op.name(), "\n    inputs: ", Joined(in, ", "),
             "  outputs: ", op.outputs().empty() ? "none (updates inputs)" : Joined(op.outputs(), ", "),
             "\n    devices: ", devices.empty() ? "none" : devices,
             "  in-place: ", inplace.empty() ? "-" : Joined(inplace, ","),
             mutates.empty() ? "" : "  updates inputs: " + Joined(mutates, ","), "  recompute: ", CostName(op.cost()),
             "  random: ", op.randomness() == Randomness::kCounterRng ? "yes" : "no", op.is_loss() ? "  loss" : "",
             "  gradient: ", GradientOf(op), op.doc().empty() ? "" : "\n    " + op.doc());
}

}  // namespace

int Ops() {
  std::vector<const OpDef*> forward, backward;
  for (const OpDef* op : OpRegistry::Get().All()) (op->name()[0] == '_' ? backward : forward).push_back(op);
  if (FLAGS_json) {
    for (const auto* list : {&forward, &backward})
      for (const OpDef* op : *list) std::printf("%s\n", Json(*op).c_str());
    return 0;
  }
  std::printf("%zu ops (param/aux inputs may be left out of a config: they are made with the init shown)\n\n",
              forward.size());
  for (const OpDef* op : forward) std::printf("%s\n", Text(*op).c_str());
  std::printf("\n%zu backward ops (made by the gradient pass, never named in configs)\n\n", backward.size());
  for (const OpDef* op : backward) std::printf("%s\n", Text(*op).c_str());
  return 0;
}

}  // namespace frugal::cli
