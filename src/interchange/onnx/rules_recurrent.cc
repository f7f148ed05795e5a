// ONNX import rule for the recurrent layers: RNN, GRU and LSTM, forward,
// default activations, no clip: an LSTM without peepholes as frugal's lstm
// op over all its steps, the others unrolled over the known sequence length.
//
// Rule of thumb: when frugal cannot express a configuration exactly, the
// rule says so (unsupported); it never approximates.
#include <algorithm>

#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {
namespace {

// The unrolled layer's nodes: X W^T + Wb + Rb for every step at once (a
// fully_connected), then per step H R^T and the gates (ONNX's order: LSTM
// i, o, f, c with peepholes P (i, o, f); GRU z, r, h with the reset applied
// before R, linear_before_reset=0).
class Unrolled {
 public:
  Unrolled(const NodeView& v, Lowering* l, int gates, int64_t h, int64_t batch)
      : v_(v), op_(v.op_type()), l_(*l), h_(h), batch_(batch), gh_(gates * h) {}

  // The outputs Y (T, B, H), Y_h and Y_c, from the steps of xw, (T, B, G H).
  void Run(Operand xw, int64_t steps, bool batch_major) {
    r_ = Add(&l_, "reshape", {{"shape", TupleStr({gh_, h_})}}, {In(2)});
    hid_ = Initial(5);
    if (op_ == "LSTM") cell_ = Initial(6);
    if (v_.HasInput(7)) {
      Operand p = Add(&l_, "reshape", {{"shape", TupleStr({3, h_})}}, {In(7)});
      for (int k = 0; k < 3; ++k)
        peep_.push_back(
            Add(&l_, "slice", {{"begin", TupleStr({k, 0})}, {"end", TupleStr({k + 1, h_})}, {"step", "(1,1)"}}, {p}));
    }
    if (op_ == "GRU") {  // R's rows for z and r, and for h
      r_zr_ = Add(&l_, "slice", {{"begin", "(0,0)"}, {"end", TupleStr({2 * h_, h_})}, {"step", "(1,1)"}}, {r_});
      r_h_ =
          Add(&l_, "slice", {{"begin", TupleStr({2 * h_, 0})}, {"end", TupleStr({gh_, h_})}, {"step", "(1,1)"}}, {r_});
    }
    std::vector<Operand> ys;
    for (int64_t t = 0; t < steps; ++t) {
      Operand xt =
          Add(&l_, "slice",
              {{"begin", TupleStr({t, 0, 0})}, {"end", TupleStr({t + 1, batch_, gh_})}, {"step", "(1,1,1)"}}, {xw});
      xt = Add(&l_, "reshape", {{"shape", TupleStr({batch_, gh_})}}, {xt});
      if (op_ == "RNN")
        hid_ = Act("tanh", Op("add", {xt, Product(hid_, r_, h_)}));
      else if (op_ == "LSTM")
        LstmStep(xt);
      else
        GruStep(xt);
      ys.push_back(Add(&l_, "reshape", {{"shape", TupleStr({1, batch_, h_})}}, {hid_}));
    }
    Operand y = ys.size() == 1 ? ys[0] : Add(&l_, "concat", {{"dim", "0"}, {"num_args", IntStr(steps)}}, ys);
    if (batch_major) y = Add(&l_, "transpose", {{"axes", "(1,0,2)"}}, {y});
    y = Add(&l_, "reshape",
            {{"shape", batch_major ? TupleStr({batch_, steps, 1, h_}) : TupleStr({steps, 1, batch_, h_})}}, {y});
    const std::string last = batch_major ? TupleStr({batch_, 1, h_}) : TupleStr({1, batch_, h_});
    l_.outputs = {y, Add(&l_, "reshape", {{"shape", last}}, {hid_})};
    if (op_ == "LSTM") l_.outputs.push_back(Add(&l_, "reshape", {{"shape", last}}, {cell_}));
  }

 private:
  Operand Act(const char* type, Operand in) { return Add(&l_, "activation", {{"act_type", type}}, {in}); }
  Operand Columns(Operand in, int64_t from, int64_t to) {
    return Add(&l_, "slice", {{"begin", TupleStr({0, from})}, {"end", TupleStr({batch_, to})}, {"step", "(1,1)"}},
               {in});
  }
  Operand Product(Operand in, Operand weight, int64_t n) {
    return Add(&l_, "fully_connected", {{"num_hidden", IntStr(n)}, {"flatten", "false"}, {"no_bias", "true"}},
               {in, weight});
  }
  // An op of no attributes. Its inputs are a braced list, made left to
  // right, so the nodes come in the order they are written.
  Operand Op(const char* op, std::vector<Operand> in) { return Add(&l_, op, {}, std::move(in)); }

  // The initial state of input i (5: H, 6: C), or zeros.
  Operand Initial(int i) {
    if (v_.HasInput(i)) return Add(&l_, "reshape", {{"shape", TupleStr({batch_, h_})}}, {In(i)});
    Tensor zeros = Tensor::Empty(Shape{batch_, h_}, DType::kFloat32, {}, MemKind::kParam);
    std::fill(zeros.f(), zeros.f() + zeros.size(), 0.f);
    l_.constants.push_back({0, i == 5 ? "initial_h" : "initial_c", zeros, false});
    return Const(static_cast<int>(l_.constants.size()) - 1);
  }

  void LstmStep(Operand xt) {
    Operand g = Op("add", {xt, Product(hid_, r_, gh_)});
    Operand gi = Columns(g, 0, h_), go = Columns(g, h_, 2 * h_), gf = Columns(g, 2 * h_, 3 * h_);
    if (!peep_.empty()) {
      gi = Op("add", {gi, Op("mul", {peep_[0], cell_})});
      gf = Op("add", {gf, Op("mul", {peep_[2], cell_})});
    }
    Operand c_new = Act("tanh", Columns(g, 3 * h_, 4 * h_));
    cell_ = Op("add", {Op("mul", {Act("sigmoid", gf), cell_}), Op("mul", {Act("sigmoid", gi), c_new})});
    if (!peep_.empty()) go = Op("add", {go, Op("mul", {peep_[1], cell_})});
    hid_ = Op("mul", {Act("sigmoid", go), Act("tanh", cell_)});
  }

  void GruStep(Operand xt) {
    Operand zr = Act("sigmoid", Op("add", {Columns(xt, 0, 2 * h_), Product(hid_, r_zr_, 2 * h_)}));
    Operand z = Columns(zr, 0, h_), reset = Columns(zr, h_, 2 * h_);
    Operand cand = Op("add", {Columns(xt, 2 * h_, gh_), Product(Op("mul", {reset, hid_}), r_h_, h_)});
    cand = Act("tanh", cand);
    Operand keep = Op("mul", {z, hid_});  // (1 - z) cand + z H
    Operand take = Op("mul", {Add(&l_, "rsub_scalar", {{"scalar", "1"}}, {z}), cand});
    hid_ = Op("add", {take, keep});
  }

  const NodeView& v_;
  const std::string op_;
  Lowering& l_;
  const int64_t h_, batch_, gh_;
  Operand r_, r_zr_, r_h_, hid_, cell_;
  std::vector<Operand> peep_;
};

// An LSTM without peepholes: frugal's lstm op over all the steps, batch
// first. ONNX's gates (i, o, f, c) become lstm's (i, f, c, o) by cutting W,
// R and the biases into their four blocks of H rows and joining them again;
// Y, Y_h and Y_c are lstm's y and the last step of y and of cs, in the
// layout's shapes.
Lowering LstmLayer(const NodeView& v, int64_t steps, int64_t batch, int64_t h, bool batch_major) {
  Lowering l;
  const int64_t features = v.InputShape(0)[2], gh = 4 * h;
  auto reshape = [&](Operand in, const std::vector<int64_t>& dims) {
    return Add(&l, "reshape", {{"shape", TupleStr(dims)}}, {in});
  };
  auto rows = [&](Operand in, int64_t from, int64_t to) {  // rows [from, to) of the first axis
    return Add(&l, "slice", {{"begin", TupleStr({from})}, {"end", TupleStr({to})}}, {in});
  };
  auto lstm_order = [&](Operand m, int64_t at) {  // the 4 H rows from row `at` in lstm's gate order
    std::vector<Operand> blocks;
    for (int k : {0, 2, 3, 1}) blocks.push_back(rows(m, at + k * h, at + (k + 1) * h));
    return Add(&l, "concat", {{"dim", "0"}, {"num_args", "4"}}, blocks);
  };
  auto zeros = [&](const std::vector<int64_t>& dims, const char* name) {
    Tensor t = Tensor::Empty(Shape(dims), DType::kFloat32, {}, MemKind::kParam);
    std::fill(t.f(), t.f() + t.size(), 0.f);
    l.constants.push_back({0, name, t, false});
    return Const(static_cast<int>(l.constants.size()) - 1);
  };
  auto state = [&](int i, const char* name) {
    return v.HasInput(i) ? reshape(In(i), {batch, h}) : zeros({batch, h}, name);
  };
  const Operand x = batch_major ? In(0) : Add(&l, "transpose", {{"axes", "(1,0,2)"}}, {In(0)});
  const Operand h0 = state(5, "initial_h"), c0 = state(6, "initial_c");
  const Operand w = lstm_order(reshape(In(1), {gh, features}), 0), r = lstm_order(reshape(In(2), {gh, h}), 0);
  Operand wb, rb;
  if (v.HasInput(3)) {
    const Operand b = reshape(In(3), {2 * gh});
    wb = lstm_order(b, 0), rb = lstm_order(b, gh);
  } else {
    wb = zeros({gh}, "i2h_bias"), rb = zeros({gh}, "h2h_bias");
  }
  Operand y = Add(&l, "lstm", {{"num_hidden", IntStr(h)}}, {x, h0, c0, w, wb, r, rb}), cs = y;
  cs.output = 1;
  auto last = [&](Operand seq) {  // (B, 1, H)
    Operand step = Add(&l, "slice", {{"begin", TupleStr({0, steps - 1})}, {"end", TupleStr({batch, steps})}}, {seq});
    return batch_major ? step : reshape(step, {1, batch, h});
  };
  const Operand y_all = batch_major ? reshape(y, {batch, steps, 1, h})
                                    : reshape(Add(&l, "transpose", {{"axes", "(1,0,2)"}}, {y}), {steps, 1, batch, h});
  l.outputs = {y_all, last(y), last(cs)};
  return l;
}

}  // namespace

// RNN / GRU / LSTM: the checks, then X W^T (+ Wb + Rb) for every step and
// the unrolled steps (Unrolled). Outputs Y, Y_h (and Y_c).
Lowering RecurrentRule(const NodeView& v) {
  const std::string& op = v.op_type();
  if (auto why = v.UnknownAttr({"hidden_size", "layout", "direction", "linear_before_reset", "activations"});
      !why.empty())
    return Unsupported(why);
  if (v.Str("direction", "forward") != "forward") return Unsupported("direction '" + v.Str("direction", "") + "'");
  if (v.Has("activations")) return Unsupported("activations other than the defaults are not supported");
  if (v.Int("linear_before_reset", 0) != 0) return Unsupported("linear_before_reset=1 is not supported");
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const bool batch_major = v.Int("layout", 0) != 0;
  const Shape &x = v.InputShape(0), &w = v.InputShape(1);
  const int64_t h = v.Int("hidden_size", 0);
  if (!x.known() || x.ndim() != 3 || !w.known() || w != Shape{1, gates * h, x[2]})
    return Unsupported(Fmt("X ", x, " and W ", w, " for hidden_size ", h, " (known shapes, one direction)"));
  const int64_t steps = batch_major ? x[1] : x[0], batch = batch_major ? x[0] : x[1], gh = gates * h;
  if (v.HasInput(4)) {
    const auto* lens = KnownInts(v, 4);
    if (!lens || std::any_of(lens->begin(), lens->end(), [&](int64_t n) { return n != steps; }))
      return Unsupported(NotKnown(v, 4, "sequence_lens") + ", each the full length");
  }
  if (v.HasInput(7) && op != "LSTM") return Unsupported("input 7");
  if (op == "LSTM" && !v.HasInput(7)) {
    Lowering l = LstmLayer(v, steps, batch, h, batch_major);
    if (v.num_outputs() > static_cast<int>(l.outputs.size())) return Unsupported(Fmt(v.num_outputs(), " outputs"));
    l.outputs.resize(v.num_outputs());
    return l;
  }
  Lowering l;
  Operand seq = batch_major ? Add(&l, "transpose", {{"axes", "(1,0,2)"}}, {In(0)}) : In(0);  // (T, B, I)
  std::vector<Operand> xw_in = {seq, Add(&l, "reshape", {{"shape", TupleStr({gh, x[2]})}}, {In(1)})};
  if (v.HasInput(3)) {  // Wb + Rb
    Operand b = Add(&l, "reshape", {{"shape", TupleStr({2, gh})}}, {In(3)});
    xw_in.push_back(Add(&l, "sum", {{"axis", "(0)"}, {"keepdims", "false"}}, {b}));
  }
  AttrMap fc{{"num_hidden", IntStr(gh)}, {"flatten", "false"}, {"no_bias", BoolStr(!v.HasInput(3))}};
  const Operand xw = Add(&l, "fully_connected", fc, xw_in);  // (T, B, G H)
  Unrolled(v, &l, gates, h, batch).Run(xw, steps, batch_major);
  if (v.num_outputs() > static_cast<int>(l.outputs.size())) return Unsupported(Fmt(v.num_outputs(), " outputs"));
  l.outputs.resize(v.num_outputs());
  return l;
}

}  // namespace frugal::onnx_map
