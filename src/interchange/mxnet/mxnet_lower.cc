// LowerComposites: MXNet's RNN operator in LSTM mode as frugal's lstm
// layers, LRN as elementwise ops around a pooling (mxnet_lower.h).
#include "interchange/mxnet/mxnet_lower.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace frugal {
// The lowering's own names, apart from the importers' (a unity build
// compiles the interchange folder's files together).
namespace mxnet_lower {
namespace {

using Input = MxnetNode::Input;

std::string Get(const std::map<std::string, std::string>& m, const std::string& key, const std::string& dflt = "") {
  auto it = m.find(key);
  return it == m.end() || it->second == "None" ? dflt : it->second;
}

// A node's attributes, without Python's hints (__shape__, __lr_mult__, ...).
std::map<std::string, std::string> OwnAttrs(const MxnetNode& n) {
  std::map<std::string, std::string> attrs;
  for (const auto& [key, value] : n.attrs)
    if (key.rfind("__", 0) != 0) attrs[key] = value;
  return attrs;
}

MxnetNode Op(const std::string& op, const std::string& name, std::map<std::string, std::string> attrs,
             std::vector<MxnetNode::Input> inputs, int line) {
  MxnetNode n;
  n.op = op;
  n.name = name;
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  n.line = line;
  return n;
}

MxnetNode Transpose(const std::string& name, MxnetNode::Input in, int line) {
  return Op("transpose", name, {{"axes", "(1,0,2)"}}, {in}, line);
}

bool IsRnn(const MxnetNode& n) { return n.op == "RNN"; }
bool IsComposite(const MxnetNode& n) { return IsRnn(n) || n.op == "LRN"; }

bool SwapsFirstTwo(const MxnetNode& n) {
  const std::set<std::string> dims{Get(n.attrs, "dim1", "0"), Get(n.attrs, "dim2", "0")};
  return (n.op == "SwapAxis" || n.op == "swapaxes") && n.inputs.size() == 1 && dims == std::set<std::string>{"0", "1"};
}

class Lowering {
 public:
  Lowering(MxnetSymbol* sym, NamedTensors* arrays) : sym_(*sym), arrays_(*arrays), old_(sym->nodes) {}

  void Run() {
    if (std::none_of(old_.begin(), old_.end(), IsComposite)) return;
    std::vector<std::vector<Input>> readers(old_.size());  // (reader, slot) of each node
    for (size_t i = 0; i < old_.size(); ++i)
      for (size_t k = 0; k < old_[i].inputs.size(); ++k)
        readers[old_[i].inputs[k].node].push_back({static_cast<int>(i), static_cast<int>(k)});
    for (const Input& h : sym_.heads)
      FRUGAL_REQUIRE(!IsRnn(old_[h.node]) || h.index == 0, Where(h.node), ": the symbol's output is its output ",
                     h.index, " (a final state); frugal's lstm gives the states of every step, not the last alone");
    std::vector<int> moved(old_.size(), -1);  // the new index of each old node
    sym_.nodes.clear();
    for (size_t i = 0; i < old_.size(); ++i) {
      const int id = static_cast<int>(i);
      if (IsRnn(old_[i])) {
        for (const Input& r : readers[i])
          FRUGAL_REQUIRE(Reads(r) == 0, Where(r.node), ": reads output ", Reads(r), " of '", old_[i].name,
                         "' (a final state); frugal's lstm gives the states of every step, not the last alone");
        moved[i] = Lower(id, moved);
        continue;
      }
      if (old_[i].op == "LRN") {
        moved[i] = LowerLrn(id, moved);
        continue;
      }
      MxnetNode n = old_[i];
      for (Input& in : n.inputs) in.node = moved[in.node];
      if (SwapsAroundAnRnn(id, readers)) {
        // After an RNN: its layers' output, batch first, is what it reads.
        if (IsRnn(old_[old_[i].inputs[0].node])) {
          moved[i] = batch_first_.at(old_[i].inputs[0].node);
          continue;
        }
        n = Transpose(n.name, n.inputs[0], n.line);
      }
      moved[i] = Add(std::move(n));
    }
    for (Input& h : sym_.heads) h.node = moved[h.node];
    Prune();
  }

 private:
  std::string Where(int i) const {
    return Fmt(sym_.path, ":", old_[i].line, ": node '", old_[i].name, "' (", old_[i].op, ")");
  }

  // The output a reader (node, input slot) reads.
  int Reads(const Input& reader) const { return old_[reader.node].inputs[reader.index].index; }

  int Add(MxnetNode n) {
    sym_.nodes.push_back(std::move(n));
    return static_cast<int>(sym_.nodes.size()) - 1;
  }

  // A node standing for (part of) old node r, at its line.
  Input AddOp(int r, const std::string& op, const std::string& name, std::map<std::string, std::string> attrs,
              std::vector<Input> inputs) {
    return {Add(Op(op, name, std::move(attrs), std::move(inputs), old_[r].line)), 0};
  }

  // A SwapAxis of dims 0 and 1 whose input is an RNN's output or that an
  // RNN reads as its data: gluon's layout NTC around the sequence-major
  // RNN, where the input is known to be 3-D (the layers, batch first,
  // read and write what it swaps: it stays only for its other readers).
  bool SwapsAroundAnRnn(int i, const std::vector<std::vector<Input>>& readers) const {
    const MxnetNode& n = old_[i];
    if (!SwapsFirstTwo(n)) return false;
    if (IsRnn(old_[n.inputs[0].node])) return true;
    return std::any_of(readers[i].begin(), readers[i].end(),
                       [&](const Input& r) { return IsRnn(old_[r.node]) && r.index == 0; });
  }

  // The values of MXNet's array `name` (arg:name, aux:name or name), float32.
  const Tensor* Array(const std::string& name) const {
    for (const auto& [key, t] : arrays_)
      if (key == "arg:" + name || key == "aux:" + name || key == name) return &t;
    return nullptr;
  }

  // The packed parameters node i gives the RNN `rnn`: an array, flattened
  // by Reshape (-1), joined along dim 0 (gluon's _rnn_param_concat).
  void Pack(int i, int rnn, std::vector<float>* out) {
    const MxnetNode& n = old_[i];
    if (n.op == "null") {
      const Tensor* t = Array(n.name);
      FRUGAL_REQUIRE(t, Where(rnn), ": its parameters '", n.name, "' have no array in the params file");
      FRUGAL_REQUIRE(t->dtype() == DType::kFloat32, Where(rnn), ": its parameters '", n.name,
                     "' are not float32; frugal imports float32 weights");
      out->insert(out->end(), t->f(), t->f() + t->size());
      return;
    }
    const std::string shape = Get(n.attrs, "shape");
    const bool flattens = (n.op == "Reshape" || n.op == "reshape") && (shape == "-1" || shape == "(-1,)");
    const bool joins =
        n.op == "_rnn_param_concat" || ((n.op == "Concat" || n.op == "concat") && Get(n.attrs, "dim") == "0");
    FRUGAL_REQUIRE(flattens || joins, Where(rnn), ": its parameters come from node '", n.name, "' (", n.op,
                   "), which frugal does not read at import; it reads an array, Reshape (-1) of one, or ",
                   "_rnn_param_concat / Concat (dim 0) of those");
    for (const Input& in : n.inputs) Pack(in.node, rnn, out);
  }

  // Each layer's begin state of RNN node r from its input `k` (layers,
  // batch, hidden): zeros of (0, hidden) where it is zeros (_zeros, or a
  // variable with a __shape__ and no array, as mx.rnn and gluon export it),
  // else the input's layer l (a learned state, or one computed).
  std::vector<Input> BeginStates(int r, int k, int64_t layers, int64_t hidden, const std::vector<int>& moved) {
    const MxnetNode& n = old_[r];
    const MxnetNode& state = old_[n.inputs[k].node];
    const char* which = k == 2 ? "_h0" : "_c0";
    std::vector<Input> out;
    if (state.op == "_zeros" || (state.op == "null" && state.attrs.count("__shape__") && !Array(state.name))) {
      for (int64_t l = 0; l < layers; ++l)
        out.push_back(AddOp(r, "_zeros", Fmt(n.name, "_l", l, which), {{"shape", Fmt("(0, ", hidden, ")")}}, {}));
      return out;
    }
    if (const Tensor* t = state.op == "null" ? Array(state.name) : nullptr) {
      const Shape& s = t->shape();
      FRUGAL_REQUIRE(s.ndim() == 3 && s[0] == layers && s[2] == hidden, Where(r), ": its begin state '", state.name,
                     "' is ", s, " in the params file, where num_layers ", layers, " and state_size ", hidden,
                     " begin from (", layers, ", batch, ", hidden, ")");
    }
    const Input given{moved[n.inputs[k].node], n.inputs[k].index};
    const Input split = AddOp(r, "SliceChannel", Fmt(n.name, which, "_layers"),
                              {{"num_outputs", std::to_string(layers)}, {"axis", "0"}, {"squeeze_axis", "1"}}, {given});
    for (int64_t l = 0; l < layers; ++l) out.push_back({split.node, static_cast<int>(l)});
    return out;
  }

  // The nodes of RNN node r; returns the index of the last (its output).
  int Lower(int r, const std::vector<int>& moved) {
    const MxnetNode& n = old_[r];
    const std::map<std::string, std::string> attrs = OwnAttrs(n);
    const std::string mode = Get(attrs, "mode");
    FRUGAL_REQUIRE(mode == "lstm", Where(r), ": mode '", mode,
                   "': frugal imports the fused RNN in LSTM mode only (as its lstm op)");
    const auto off = [&](const char* key, const char* off_value) {
      const std::string v = Get(attrs, key, off_value);
      FRUGAL_REQUIRE(v == off_value || (v == "False" && std::string(off_value) == "false"), Where(r), ": ", key, " '",
                     v, "' is not supported: frugal's lstm computes ", key, " ", off_value);
    };
    off("bidirectional", "false");
    off("projection_size", "");
    off("lstm_state_clip_min", "");
    off("lstm_state_clip_max", "");
    off("lstm_state_clip_nan", "false");
    off("use_sequence_length", "false");
    static const std::set<std::string> kRead{"mode",
                                             "bidirectional",
                                             "projection_size",
                                             "lstm_state_clip_min",
                                             "lstm_state_clip_max",
                                             "lstm_state_clip_nan",
                                             "use_sequence_length",
                                             "state_size",
                                             "num_layers",
                                             "p",
                                             "state_outputs"};
    for (const auto& [key, value] : attrs)
      FRUGAL_REQUIRE(kRead.count(key), Where(r), ": attribute '", key, "' = '", value, "' has no frugal counterpart");
    const int64_t hidden = std::atoll(Get(attrs, "state_size", "0").c_str());
    const int64_t layers = std::atoll(Get(attrs, "num_layers", "1").c_str());
    FRUGAL_REQUIRE(hidden > 0 && layers > 0, Where(r), ": state_size '", Get(attrs, "state_size"), "' and num_layers '",
                   Get(attrs, "num_layers", "1"), "' must be positive whole numbers");
    FRUGAL_REQUIRE(n.inputs.size() == 4, Where(r), ": has ", n.inputs.size(),
                   " inputs; in LSTM mode RNN reads data, parameters, state and state_cell");
    std::vector<float> packed;
    Pack(n.inputs[1].node, r, &packed);
    // Weights (4H x I then 4H x H per layer; I = H after the first), then
    // biases (2 x 4H per layer): the first layer's input size from the rest.
    const int64_t g = 4 * hidden, rest = (layers - 1) * 2 * g * hidden + g * hidden + layers * 2 * g;
    const int64_t total = static_cast<int64_t>(packed.size());
    FRUGAL_REQUIRE(total > rest && (total - rest) % g == 0, Where(r), ": its parameters hold ", total,
                   " values, where num_layers ", layers, " of state_size ", hidden, " hold ", rest, " + ", g,
                   " x the input size (MXNet's packed layout); give the params file saved with this symbol");
    const int64_t input = (total - rest) / g;
    const std::string p = Get(attrs, "p", "0");
    const bool dropout = std::atof(p.c_str()) > 0;
    // Batch first: what a SwapAxis before it swapped, or the data transposed.
    const MxnetNode& data = old_[n.inputs[0].node];
    Input x =
        SwapsFirstTwo(data)
            ? Input{moved[data.inputs[0].node], data.inputs[0].index}
            : Input{Add(Transpose(n.name + "_batch_first", {moved[n.inputs[0].node], n.inputs[0].index}, n.line)), 0};
    const std::vector<Input> h0s = BeginStates(r, 2, layers, hidden, moved);
    const std::vector<Input> c0s = BeginStates(r, 3, layers, hidden, moved);
    int64_t at = 0, bias_at = total - layers * 2 * g;
    auto add = [&](const std::string& op, const std::string& name, std::map<std::string, std::string> a,
                   std::vector<Input> in) { return AddOp(r, op, name, std::move(a), std::move(in)); };
    auto take = [&](const std::string& name, Shape shape, int64_t* from) {  // the next values, as a variable
      Tensor t = Tensor::Empty(shape, DType::kFloat32, {}, MemKind::kParam);
      std::copy(packed.begin() + *from, packed.begin() + *from + t.size(), t.f());
      *from += t.size();
      arrays_.emplace_back("arg:" + name, std::move(t));
      return add("null", name, {}, {});
    };
    for (int64_t l = 0; l < layers; ++l) {
      const std::string layer = Fmt(n.name, "_l", l);
      if (l > 0 && dropout) x = add("Dropout", layer + "_dropout", {{"p", p}}, {x});
      const Input h0 = h0s[l], c0 = c0s[l];
      const Input wx = take(layer + "_i2h_weight", Shape{g, l == 0 ? input : hidden}, &at);
      const Input wh = take(layer + "_h2h_weight", Shape{g, hidden}, &at);
      const Input bx = take(layer + "_i2h_bias", Shape{g}, &bias_at);
      const Input bh = take(layer + "_h2h_bias", Shape{g}, &bias_at);
      x = add("RNN", layer, {{"num_hidden", std::to_string(hidden)}}, {x, h0, c0, wx, bx, wh, bh});
    }
    batch_first_[r] = x.node;
    return Add(Transpose(n.name, x, n.line));
  }

  // LRN's nodes; returns the index of the last (its output).
  int LowerLrn(int r, const std::vector<int>& moved) {
    const MxnetNode& n = old_[r];
    const std::map<std::string, std::string> attrs = OwnAttrs(n);
    for (const auto& [key, value] : attrs)
      FRUGAL_REQUIRE(key == "alpha" || key == "beta" || key == "knorm" || key == "nsize", Where(r), ": attribute '",
                     key, "' = '", value, "' has no frugal counterpart (LRN takes alpha, beta, knorm, nsize)");
    const int64_t size = std::atoll(Get(attrs, "nsize", "0").c_str());
    FRUGAL_REQUIRE(size > 0 && size % 2 == 1, Where(r), ": nsize '", Get(attrs, "nsize"),
                   "': frugal's LRN takes an odd window (the channels centred on each)");
    FRUGAL_REQUIRE(n.inputs.size() == 1, Where(r), ": has ", n.inputs.size(), " inputs; LRN reads one");
    const std::string& name = n.name;
    const std::string beta = Get(attrs, "beta", "0.75");
    const std::string minus_beta = beta[0] == '-' ? beta.substr(1) : "-" + beta;
    const Input x{moved[n.inputs[0].node], n.inputs[0].index};
    auto add = [&](const std::string& op, const std::string& suffix, std::map<std::string, std::string> a,
                   std::vector<Input> in) { return AddOp(r, op, name + suffix, std::move(a), std::move(in)); };
    Input y = add("square", "_square", {}, {x});
    y = add("transpose", "_channels_by_row", {{"axes", "(0,2,1,3)"}}, {y});
    y = add("Pooling", "_window",
            {{"pool_type", "avg"},
             {"kernel", Fmt("(", size, ",1)")},
             {"stride", "(1,1)"},
             {"pad", Fmt("(", size / 2, ",0)")},
             {"count_include_pad", "True"}},
            {y});
    y = add("transpose", "_window_nchw", {{"axes", "(0,2,1,3)"}}, {y});
    y = add("_mul_scalar", "_scaled", {{"scalar", Get(attrs, "alpha", "0.0001")}}, {y});
    y = add("_plus_scalar", "_shifted", {{"scalar", Get(attrs, "knorm", "2")}}, {y});
    y = add("log", "_log", {}, {y});
    y = add("_mul_scalar", "_power", {{"scalar", minus_beta}}, {y});
    y = add("exp", "_inverse", {}, {y});
    return add("elemwise_mul", "", {}, {x, y}).node;
  }

  // Keeps the nodes the heads read, in order, and the arrays their
  // variables read; an array only removed nodes read goes with them.
  void Prune() {
    std::vector<bool> live(sym_.nodes.size(), false);
    for (const Input& h : sym_.heads) live[h.node] = true;
    for (size_t i = sym_.nodes.size(); i-- > 0;)
      if (live[i])
        for (const Input& in : sym_.nodes[i].inputs) live[in.node] = true;
    std::vector<int> index(sym_.nodes.size(), -1);
    std::vector<MxnetNode> kept;
    std::set<std::string> dropped_vars;
    for (size_t i = 0; i < sym_.nodes.size(); ++i) {
      MxnetNode& n = sym_.nodes[i];
      if (!live[i]) {
        if (n.op == "null") dropped_vars.insert(n.name);
        continue;
      }
      for (Input& in : n.inputs) in.node = index[in.node];
      index[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(n));
    }
    for (Input& h : sym_.heads) h.node = index[h.node];
    sym_.nodes = std::move(kept);
    for (const MxnetNode& n : sym_.nodes) dropped_vars.erase(n.name);
    arrays_.erase(std::remove_if(arrays_.begin(), arrays_.end(),
                                 [&](const auto& a) {
                                   const std::string& key = a.first;
                                   const size_t colon = key.rfind("arg:", 0) == 0 || key.rfind("aux:", 0) == 0 ? 4 : 0;
                                   return dropped_vars.count(key.substr(colon)) > 0;
                                 }),
                  arrays_.end());
  }

  MxnetSymbol& sym_;
  NamedTensors& arrays_;
  const std::vector<MxnetNode> old_;
  std::map<int, int> batch_first_;  // of each RNN: its last layer's node (B, T, H)
};

}  // namespace
}  // namespace mxnet_lower

void LowerComposites(MxnetSymbol* sym, NamedTensors* arrays) { mxnet_lower::Lowering(sym, arrays).Run(); }

}  // namespace frugal
