// The operator registry. An op is a name plus a table of typed attributes:
// its inputs, how to parse its parameters, shape inference, what its backward
// pass reads, how its gradient is built, which outputs may overwrite which
// inputs, how costly it is to recompute, whether it draws random numbers, and
// its kernels. Passes never name an op; they ask the op.
//
// Ops register through the inventory in src/ops/op_list.def, one file per op.
#pragma once

#include <algorithm>
#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/base.h"
#include "frugal/graph.h"
#include "frugal/tensor.h"

namespace frugal {

// How costly an op is to recompute: the recompute policies ask this.
enum class Cost : uint8_t {
  kFree,       // views and copies (reshape, flatten)
  kCheap,      // elementwise, normalisation, pooling: memory-bound
  kExpensive,  // convolution, matrix products: compute-bound
};
const char* CostName(Cost c);

// Whether an op draws random numbers. Random ops use a counter-based RNG keyed
// by (seed, node, step), so a recomputation reproduces the same draws.
enum class Randomness : uint8_t { kNone, kCounterRng };

// What a kernel must do with each output.
enum class OpReq : uint8_t {
  kNull,   // nobody reads it: skip
  kWrite,  // overwrite (the buffer may alias an in-place input)
  kAdd,    // accumulate into the existing contents
};

// Writes v to *y honouring req (kNull is skipped by callers).
inline void Assign(float* y, OpReq req, float v) {
  if (req == OpReq::kAdd)
    *y += v;
  else
    *y = v;
}

// One value that the backward pass of an op reads. An input the node does
// not have (an optional last input, NumInputsFn) is not read; list such
// reads last (the one-node gradient's inputs follow the list).
struct BackwardRead {
  enum Kind : uint8_t { kInput, kOutput, kOutGrad } kind;
  int index;
  bool operator==(const BackwardRead& o) const { return kind == o.kind && index == o.index; }
};
inline BackwardRead Input(int i) { return {BackwardRead::kInput, i}; }
inline BackwardRead Output(int i) { return {BackwardRead::kOutput, i}; }
inline BackwardRead OutGrad(int i) { return {BackwardRead::kOutGrad, i}; }

// Reads typed values from a node's attribute map; every key must be consumed
// (Finish), so a misspelt attribute is an error rather than ignored. `where`
// names the node in errors; it is called only when there is one (building
// the text for every node took a tenth of planning a large graph).
class AttrReader {
 public:
  AttrReader(std::function<std::string()> where, AttrMap attrs) : where_(std::move(where)), attrs_(std::move(attrs)) {}
  int64_t Int(const std::string& key);
  int64_t Int(const std::string& key, int64_t dflt);
  double Float(const std::string& key, double dflt);
  bool Bool(const std::string& key, bool dflt);
  std::string Str(const std::string& key, const std::string& dflt);
  // One of the allowed words.
  std::string Choice(const std::string& key, const std::string& dflt, const std::vector<std::string>& allowed);
  // "(2,3,-1)" or "2,3,-1".
  std::vector<int64_t> Ints(const std::string& key);
  void Finish() const;
  std::string where() const { return where_(); }

 private:
  const std::string* Find(const std::string& key);
  std::string GivenNote() const;  // "; the node gives 'a', 'b'" for errors
  std::function<std::string()> where_;
  AttrMap attrs_;
  std::vector<std::string> known_;
};

struct KernelCtx {
  const Node& node;
  const std::vector<Tensor>& in;
  const std::vector<Tensor>& out;
  const std::vector<OpReq>& req;
  const Tensor& workspace;  // undefined when the op asked for none
  bool is_train;
  // True when this run recomputes a dropped result for the backward pass:
  // side effects (moving statistics) must not happen twice.
  bool is_recompute;
  // Identifies the forward node this node belongs to, for counter-based RNG:
  // StableHash of the name of the node itself, of the node a recomputed copy
  // recomputes, or of the node a gradient node differentiates. So a
  // recomputation draws the same numbers, and so does the gradient.
  uint64_t node_key;
  uint64_t seed;
  int64_t step;
  // Threads this kernel may use (OpenMP teams, BLAS), set from the engine so
  // that engine workers and kernel threads do not oversubscribe the cores.
  // The engine's workers also make it their OpenMP default, so plain
  // `#pragma omp parallel` follows it; pass it to num_threads() to be explicit.
  int num_threads = 1;
  // A CUDA kernel's GPU stream and handles; nullptr on the CPU. CUDA
  // kernels launch work on that stream and return without waiting for it.
  cuda::Context* cuda = nullptr;
  // The learning rate scheduled for this run (before lr_mult), for the
  // optimizer update ops; 0 in the forward and backward graphs.
  float lr = 0;
  // Which part of the global batch this process holds (a data-parallel
  // rank; Executor::SetDataPart). A random op draws element i of its n from
  // word data_part * n + i of its stream, so R ranks of batch B draw what
  // one process of batch R B would, and no two ranks share a mask.
  int64_t data_part = 0;
  template <typename P>
  const P& params() const {
    return std::any_cast<const P&>(node.params);
  }
};
using Kernel = std::function<void(const KernelCtx&)>;

// Shape inference sees the node, its input shapes (which it may complete,
// e.g. a weight's shape) and, for backward nodes, the forward node's shapes.
struct ShapeCtx {
  const Node& node;
  std::vector<Shape>& in;
  std::vector<Shape>& out;
  const std::vector<Shape>* fwd_in = nullptr;   // backward nodes only
  const std::vector<Shape>* fwd_out = nullptr;  // backward nodes only
  template <typename P>
  const P& params() const {
    return std::any_cast<const P&>(node.params);
  }
  // Throws Error naming the node: "<where>: <message>".
  [[noreturn]] void Fail(const std::string& message) const;
};
using InferShapeFn = std::function<void(ShapeCtx&)>;
// Every input and every output has the shape of input 0 (one that is known
// gives the others theirs).
void InferSameShape(ShapeCtx& c);

// Element-type inference sees the node, its inputs' types and, for backward
// nodes, the forward node's; it sets each output's (OpDef::InferDTypes).
struct DTypeCtx {
  const Node& node;
  const std::vector<DType>& in;
  std::vector<DType>& out;
  const Node* fwd = nullptr;                    // backward nodes only: the forward node
  const std::vector<DType>* fwd_in = nullptr;   // and its inputs' types
  const std::vector<DType>* fwd_out = nullptr;  // and its outputs'
  template <typename P>
  const P& params() const {
    return std::any_cast<const P&>(node.params);
  }
};
using InferDTypeFn = std::function<void(DTypeCtx&)>;

// What a workspace function sees: the node, its input and output shapes,
// its element type (input 0's: a bfloat16 node's library calls convert
// through smaller buffers) and its inputs' and outputs' layouts.
struct WorkspaceCtx {
  const Node& node;
  const std::vector<Shape>& in;
  const std::vector<Shape>& out;
  DType dtype;
  const std::vector<Layout>& in_layouts;
  const std::vector<Layout>& out_layouts;
  template <typename P>
  const P& params() const {
    return std::any_cast<const P&>(node.params);
  }
};
using WorkspaceFn = std::function<int64_t(const WorkspaceCtx&)>;

// What a gradient function sees of the forward node it differentiates. Where
// the memory strategy dropped a forward result, inputs/outputs name its
// recomputed copy, so gradient nodes must read these, not the node's own
// inputs.
struct GradCtx {
  int fwd;                       // the forward node
  std::vector<Entry> inputs;     // its inputs (recomputed copies where dropped)
  std::vector<Entry> outputs;    // its outputs (likewise)
  std::vector<Entry> out_grads;  // gradients of its outputs (invalid where none flows)
};

// Builds the gradient of a forward node out of graph nodes; returns one
// entry per input (invalid where the input gets no gradient).
using GradientFn = std::function<std::vector<Entry>(Graph& g, const GradCtx& c)>;

// A node of op `backward_op` for the forward node c.fwd, with its name,
// params, attributes and config location; the caller gives its inputs.
Node BackwardNode(const Graph& g, const GradCtx& c, const std::string& backward_op);

// A loss head's prediction at inference, where its output is not one
// (OpDef::Predicts): adds to g the nodes that compute it from the inputs of
// node `n` (a copy: g may grow) and returns their output.
using PredictFn = std::function<Entry(Graph& g, const Node& n)>;

// Forward FLOPs of a node given its input and output shapes.
using FlopsFn = std::function<double(const Node&, const std::vector<Shape>& in, const std::vector<Shape>& out)>;

// Description of one input: its name, and whether the config may leave it
// out, in which case a variable "<node>_<name>" of kind `made_as` (kParam:
// learnable; kAux: state the op updates) is made with initializer `init`.
struct InputSpec {
  std::string name;
  VarKind made_as = VarKind::kNone;  // kNone: the config must give it
  std::string init;
};

class OpDef {
 public:
  explicit OpDef(std::string name) : name_(std::move(name)) {}

  // --- declaration, chained in each op's Register function ---
  OpDef& Doc(std::string d) {
    doc_ = std::move(d);
    return *this;
  }
  OpDef& Inputs(std::vector<InputSpec> in) {
    inputs_ = std::move(in);
    return *this;
  }
  OpDef& Outputs(std::vector<std::string> out) {
    outputs_ = std::move(out);
    return *this;
  }
  // One input x and one output y: the signature of most single-tensor ops.
  OpDef& Unary() { return Inputs({{"x"}}).Outputs({"y"}); }
  // An elementwise op: Unary, y of x's shape, and y may overwrite x.
  OpDef& Elementwise() { return Unary().InferShape(InferSameShape).Inplace({{0, 0}}); }
  // A loss head of x against a label: inputs x and label, one output (named
  // `y`) that may overwrite x.
  OpDef& LabelLoss(const std::string& y) { return Inputs({{"x"}, {"label"}}).Outputs({y}).Loss().Inplace({{0, 0}}); }
  // The inputs actually used by a node, given its params (e.g. no bias).
  OpDef& NumInputsFn(std::function<int(const std::any&)> f) {
    num_inputs_ = std::move(f);
    return *this;
  }
  OpDef& NumOutputsFn(std::function<int(const std::any&)> f) {
    num_outputs_ = std::move(f);
    return *this;
  }
  // Input 0 holds indices in [0, bound(params)) (an embedding's token ids),
  // so synthetic data for it (`frugal time`) are whole numbers there.
  OpDef& IndexInput(std::function<int64_t(const std::any&)> bound) {
    index_bound_ = std::move(bound);
    return *this;
  }
  // Passes ask an op's properties, never its name:
  // The op is the activation `act_type` (relu: "relu"), so an op that
  // FusesActivation of that type may take it in (FuseBnRelu).
  OpDef& Activation(std::string act_type) {
    activation_ = std::move(act_type);
    return *this;
  }
  // A following activation of one of these types may become part of this op
  // (the node's attribute act_type), applied to output 0.
  OpDef& FusesActivation(std::vector<std::string> act_types) {
    fuses_ = std::move(act_types);
    return *this;
  }
  // Output 0 is the elementwise sum of the inputs, of one shape (a gradient
  // sum the memory plan may fold into an op that adds into its output).
  OpDef& SumsInputs() {
    sums_inputs_ = true;
    return *this;
  }
  // The bound of input 0's indices; 0 where it holds none.
  int64_t IndexBound(const std::any& params) const { return index_bound_ ? index_bound_(params) : 0; }
  OpDef& Params(std::function<std::any(AttrReader&)> parse) {
    parse_ = std::move(parse);
    return *this;
  }
  // Typed params: P::Parse(AttrReader&) reads and checks the node's
  // attributes; kernels read them as params<P>().
  template <typename P>
  OpDef& Params() {
    return Params([](AttrReader& a) { return std::any(P::Parse(a)); });
  }
  OpDef& InferShape(InferShapeFn f) {
    infer_shape_ = std::move(f);
    return *this;
  }
  // Output element types where the default (InferDTypes) does not fit.
  OpDef& InferDType(InferDTypeFn f) {
    infer_dtype_ = std::move(f);
    return *this;
  }
  // The op's kernels, and its backward op's, take bfloat16 activations (the
  // inputs a config must give, and the visible outputs), parameters and
  // hidden outputs staying float32. A mixed-precision graph runs such ops in
  // bfloat16 and every other op in float32 behind casts (ToMixedPrecision).
  OpDef& Bf16() {
    bf16_ = true;
    return *this;
  }
  // Exactly what the backward pass reads. With a backward op name, the
  // gradient is one node of that op reading these values, with one output
  // per forward input.
  OpDef& Backward(std::vector<BackwardRead> reads, std::string backward_op = "") {
    backward_reads_ = std::move(reads);
    backward_op_ = std::move(backward_op);
    return *this;
  }
  OpDef& Gradient(GradientFn f) {
    gradient_ = std::move(f);
    return *this;
  }
  // This op is itself a backward op or has no gradient by design.
  OpDef& NoGradient() {
    no_gradient_ = true;
    return *this;
  }
  // A loss head: its backward pass starts here and reads no output gradient.
  OpDef& Loss() {
    is_loss_ = true;
    return *this;
  }
  // Visible output 0 is (N, 2): per row a loss and the rank of the label
  // among the classes, not probabilities; the metrics read it so
  // (frugal/metrics.h, OutputKind::kLossAndRank).
  OpDef& OutputsLossAndRank() {
    loss_and_rank_ = true;
    return *this;
  }
  // How inference (PredictionGraph, `frugal predict`) computes this loss
  // head's prediction, the probabilities, when its output is something
  // else (linear_cross_entropy's loss and rank); a head without one
  // predicts its visible output 0 (softmax_cross_entropy's p).
  OpDef& Predicts(PredictFn f) {
    predict_ = std::move(f);
    return *this;
  }
  OpDef& Inplace(std::vector<std::pair<int, int>> pairs) {
    inplace_ = std::move(pairs);
    return *this;
  }
  // Inputs the forward kernel updates in place when training (aux state;
  // an optimizer update's weight and state). An op whose only effect is on
  // such inputs may have no outputs.
  OpDef& Mutates(std::vector<int> inputs) {
    mutates_ = std::move(inputs);
    return *this;
  }
  // Every input, however many a node has (rescale_clip).
  OpDef& MutatesAll() {
    mutates_all_ = true;
    return *this;
  }
  // Only the first n outputs are results; the rest exist for the backward
  // pass (saved statistics) and never become graph outputs by default.
  OpDef& VisibleOutputs(int n) {
    visible_outputs_ = n;
    return *this;
  }
  // The kernel writes all its outputs or none (one library call makes them
  // together): where any is read, the plan gives the unread ones bytes too,
  // for the node's own step. Max pooling makes y to make the argmax, and a
  // recomputed pooling is read for its argmax alone.
  OpDef& WritesOutputsTogether() {
    outputs_together_ = true;
    return *this;
  }
  OpDef& Recompute(Cost c) {
    cost_ = c;
    return *this;
  }
  // Outputs whose kernel honours OpReq::kAdd (adds into the buffer). Where
  // such an output is one part of a gradient sum (add_n(sum, part), each
  // read by that add_n alone) the planner has the op add the part into the
  // sum's buffer and the add_n do nothing: the weight gradient of an
  // unrolled RNN accumulates in its GEMM, not in an extra pass per step.
  OpDef& AddTo(std::vector<int> outputs) {
    add_to_ = std::move(outputs);
    return *this;
  }
  // A recomputed copy (mirror) of this op reads input `in` from output `out`
  // of the node it recomputes, which stays alive (it must be small): batch_norm's
  // mirror takes the saved batch statistics in place of the moving ones and
  // only applies them, one pass over x instead of three.
  OpDef& MirrorReads(std::vector<std::pair<int, int>> in_from_out) {
    mirror_reads_ = std::move(in_from_out);
    return *this;
  }
  OpDef& Random(Randomness r) {
    rng_ = r;
    return *this;
  }
  // Scratch bytes of one run (WorkspaceCtx: shapes, element type, layouts).
  OpDef& Workspace(WorkspaceFn f) {
    workspace_ = std::move(f);
    return *this;
  }
  // The op's CPU kernels take the listed 4-D activations (input and output
  // slots; kAllSlots: every input) channels-last as well as plain
  // (Layout::kNhwc), read from each tensor's layout(). `tied`: one layout
  // for all of them (elementwise ops, batch_norm); otherwise each slot is
  // laid out on its own (convolution reorders what its primitive does not
  // take). ChooseLayouts makes an activation channels-last only where every
  // node touching it allows it.
  static constexpr int kAllSlots = -1;
  OpDef& ChannelsLast(std::vector<int> inputs, std::vector<int> outputs, bool tied) {
    nhwc_inputs_ = std::move(inputs);
    nhwc_outputs_ = std::move(outputs);
    nhwc_tied_ = tied;
    return *this;
  }
  OpDef& CpuKernel(Kernel k) {
    cpu_ = std::move(k);
    return *this;
  }
  // The CUDA kernel, set by the op's src/ops/cuda/<op>.cu (listed in
  // src/ops/cuda/cuda_op_list.def) where frugal is built with CUDA.
  OpDef& CudaKernel(Kernel k) {
    cuda_ = std::move(k);
    return *this;
  }
  // Floating-point operations of one run (default: one per output element).
  OpDef& Flops(FlopsFn f) {
    flops_ = std::move(f);
    return *this;
  }

  // --- queries, used by passes and the executor ---
  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  int NumInputs(const std::any& params) const;
  int NumOutputs(const std::any& params) const;
  const std::vector<std::string>& outputs() const { return outputs_; }
  std::any ParseParams(AttrReader& r) const;
  const InferShapeFn& infer_shape() const { return infer_shape_; }
  // Sets c.out. By default, the node of a one-node gradient (this op is its
  // forward op's backward op) gives each gradient the type of the forward
  // input it belongs to; any other node gives its visible outputs input 0's
  // type (float32 without inputs), requiring every input that is not a
  // parameter to have it, and its hidden outputs (saved statistics) float32.
  // Throws Error naming the node on mixed types.
  void InferDTypes(DTypeCtx& c) const;
  // The op decides its output types itself (InferDType: cast, zeros_like),
  // so it takes inputs of any type.
  bool has_dtype_rule() const { return static_cast<bool>(infer_dtype_); }
  bool bf16() const { return bf16_; }
  const std::vector<BackwardRead>& backward_reads() const { return backward_reads_; }
  const std::string& backward_op() const { return backward_op_; }
  bool is_loss() const { return is_loss_; }
  bool outputs_loss_and_rank() const { return loss_and_rank_; }
  const PredictFn& predict() const { return predict_; }
  bool has_gradient() const { return !no_gradient_; }
  const std::string& activation() const { return activation_; }
  bool fuses_activation(const std::string& act_type) const {
    return !act_type.empty() && std::find(fuses_.begin(), fuses_.end(), act_type) != fuses_.end();
  }
  bool sums_inputs() const { return sums_inputs_; }
  // Adds the gradient nodes of a forward node (the op's GradientFn, or the
  // default one-node gradient built from Backward()).
  std::vector<Entry> BuildGradient(Graph& g, const GradCtx& c) const;
  double Flops(const Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out) const;
  const std::vector<std::pair<int, int>>& inplace() const { return inplace_; }
  const std::vector<int>& mutates() const { return mutates_; }
  bool writes_outputs_together() const { return outputs_together_; }
  bool mutates_all() const { return mutates_all_; }
  bool mutates(int input) const {
    return mutates_all_ || std::find(mutates_.begin(), mutates_.end(), input) != mutates_.end();
  }
  const std::vector<std::pair<int, int>>& mirror_reads() const { return mirror_reads_; }
  const std::vector<int>& add_to() const { return add_to_; }
  int NumVisibleOutputs(const std::any& params) const {
    return visible_outputs_ < 0 ? NumOutputs(params) : visible_outputs_;
  }
  Cost cost() const { return cost_; }
  Randomness randomness() const { return rng_; }
  int64_t WorkspaceBytes(const WorkspaceCtx& c) const { return workspace_ ? workspace_(c) : 0; }
  bool has_workspace() const { return static_cast<bool>(workspace_); }
  // ChannelsLast: whether input (or output) slot k may be channels-last, and
  // whether the slots share one layout.
  bool nhwc_input(int k) const { return HasSlot(nhwc_inputs_, k); }
  bool nhwc_output(int k) const { return HasSlot(nhwc_outputs_, k); }
  bool nhwc_tied() const { return nhwc_tied_; }
  const Kernel& cpu_kernel() const { return cpu_; }
  const Kernel& cuda_kernel() const { return cuda_; }
  // The kernel for a device type (may be empty).
  const Kernel& kernel(DeviceType t) const { return t == DeviceType::kCUDA ? cuda_ : cpu_; }

 private:
  std::string name_, doc_;
  std::vector<InputSpec> inputs_;
  std::vector<std::string> outputs_;
  std::function<int(const std::any&)> num_inputs_, num_outputs_;
  std::function<int64_t(const std::any&)> index_bound_;
  std::string activation_;
  std::vector<std::string> fuses_;
  bool sums_inputs_ = false;
  std::function<std::any(AttrReader&)> parse_;
  InferShapeFn infer_shape_;
  InferDTypeFn infer_dtype_;
  bool bf16_ = false;
  std::vector<BackwardRead> backward_reads_;
  std::string backward_op_;
  GradientFn gradient_;
  bool no_gradient_ = false;
  bool is_loss_ = false;
  bool loss_and_rank_ = false;
  PredictFn predict_;
  std::vector<std::pair<int, int>> inplace_;
  std::vector<int> mutates_;
  bool mutates_all_ = false;
  std::vector<std::pair<int, int>> mirror_reads_;
  std::vector<int> add_to_;
  int visible_outputs_ = -1;
  bool outputs_together_ = false;
  Cost cost_ = Cost::kCheap;
  Randomness rng_ = Randomness::kNone;
  WorkspaceFn workspace_;
  std::vector<int> nhwc_inputs_, nhwc_outputs_;
  bool nhwc_tied_ = false;
  static bool HasSlot(const std::vector<int>& slots, int k) {
    return std::find(slots.begin(), slots.end(), k) != slots.end() ||
           std::find(slots.begin(), slots.end(), kAllSlots) != slots.end();
  }
  Kernel cpu_, cuda_;
  FlopsFn flops_;
};

class OpRegistry {
 public:
  // The registry with every op registered by RegisterOps.
  static const OpRegistry& Get();
  OpDef& Add(const std::string& name);
  // A registered op, for adding its CUDA kernel (src/ops/cuda).
  OpDef& Existing(const std::string& name);
  // nullptr if absent.
  const OpDef* Find(const std::string& name) const;
  // Throws Error "<where()>: unknown op 'x' (did you mean 'y'?)"; where() is
  // called only then.
  const OpDef& Require(const std::string& name, const std::function<std::string()>& where) const;
  // All ops, sorted by name.
  std::vector<const OpDef*> All() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Registers every op of src/ops/op_list.def (and, in a CUDA build, their
// CUDA kernels, src/ops/cuda/cuda_op_list.def) in r. Defined by the ops
// (src/ops/registry.cc): the graph knows no op by name.
void RegisterOps(OpRegistry* r);

}  // namespace frugal
