// The parsed params of the ops that have a CUDA kernel beside their CPU one:
// each op file (src/ops/<op>.cc) parses them, and its src/ops/cuda/<op>.cu
// reads the same struct from KernelCtx::params. The meaning of every field is
// documented at the top of the op's file.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "frugal/update_rule.h"
#include "ops/conv_util.h"

namespace frugal {

class AttrReader;

// activation.cc
enum class Act { kRelu, kSigmoid, kTanh, kSoftRelu };

// attention.cc (also read by the ONNX exporter)
struct AttentionParams {
  bool causal = false;
  bool masked = false;  // a fourth input, the additive mask
  float scale = 0;      // 0: 1 / sqrt(D)
  float dropout = 0;
  static AttentionParams Parse(AttrReader& a);
};

// batch_norm.cc
struct BnParams {
  double eps = 1e-3, momentum = 0.9;
  bool fix_gamma = true, use_global_stats = false;
  bool relu = false;  // act_type "relu": y = max(bn(x), 0), fused (FuseBnRelu makes these)
  static BnParams Parse(AttrReader& a);
};

// deconvolution.cc (params: ConvParams): the pad and adj in effect for x
// (target_shape overrides the given ones).
void EffectivePad(const ConvParams& p, const Shape& x, Pair* pad, Pair* adj);

// dropout.cc
struct DropoutParams {
  float p = 0.5f;
  static DropoutParams Parse(AttrReader& a);
};

// elemwise_scalar.cc
struct ScalarParams {
  float scalar = 0;
  static ScalarParams Parse(AttrReader& a);
};

// elemwise_unary.cc (clip; the other unary ops have no params)
struct ClipParams {
  float a_min = 0, a_max = 0;
  static ClipParams Parse(AttrReader& a);
};
// layer_norm.cc
struct LayerNormParams {
  int64_t axis = -1;
  double eps = 1e-5;
  bool no_bias = false;
  int64_t Axis(const Shape& x) const { return axis < 0 ? axis + x.ndim() : axis; }
  static LayerNormParams Parse(AttrReader& a);
};
// x as R rows of D elements, for a layer_norm's axis.
struct LayerNormRows {
  int64_t r = 1, d = 1;
  LayerNormRows(const Shape& x, int64_t axis) {
    for (int k = 0; k < x.ndim(); ++k) (k < axis ? r : d) *= x[k];
  }
};

struct GeluParams {
  bool tanh = false;  // approximate "tanh" rather than the erf form
  static GeluParams Parse(AttrReader& a);
};
// The params a unary op's functions take (elemwise_unary.cc and its CUDA
// kernels): the op's own `Params` (gelu), else ClipParams (which all but
// clip ignore); UnaryParamsFrom reads a node's, or the defaults.
template <typename Op, typename = void>
struct UnaryParamsType {
  using type = ClipParams;
};
template <typename Op>
struct UnaryParamsType<Op, std::void_t<typename Op::Params>> {
  using type = typename Op::Params;
};
template <typename Op>
using UnaryParams = typename UnaryParamsType<Op>::type;
template <typename Op>
UnaryParams<Op> UnaryParamsFrom(const KernelCtx& c) {
  return c.node.params.has_value() ? c.params<UnaryParams<Op>>() : UnaryParams<Op>{};
}

// embedding.cc
struct EmbeddingParams {
  int64_t input_dim = 0, output_dim = 0;
  static EmbeddingParams Parse(AttrReader& a);
};

// fully_connected.cc
struct FcParams {
  int64_t num_hidden = 0;
  bool no_bias = false;
  bool flatten = true;
  static FcParams Parse(AttrReader& a);
};

// leaky_relu.cc
struct LeakyParams {
  bool elu = false;
  float slope = 0.25f;
  static LeakyParams Parse(AttrReader& a);
};

// make_loss.cc
struct MakeLossParams {
  double grad_scale = 1.0;
  std::string normalization = "null";
  float valid_thresh = 0;
  static MakeLossParams Parse(AttrReader& a);
};

// pooling.cc
struct PoolParams {
  bool max = true, global = false, count_include_pad = true, full = false;
  Pair kernel{}, stride{1, 1}, pad{0, 0};
  std::string Key() const {
    return Fmt(max ? "max" : "avg", global ? "g" : "", count_include_pad ? "i" : "e", full ? "f" : "v", PairStr(kernel),
               PairStr(stride), PairStr(pad));
  }
  static PoolParams Parse(AttrReader& a);
};
// The window geometry of pooling over x: kernel, stride, left and right
// pads ("full" may pad more on the right), output size.
struct Window {
  Pair kernel, stride, pad_l, pad_r;
  int64_t oh, ow;
};
Window WindowFor(const PoolParams& p, const Shape& x);

// regression_output.cc
struct RegressionParams {
  double grad_scale = 1.0;
  static RegressionParams Parse(AttrReader& a);
};

// slice.cc
using OptInts = std::vector<std::optional<int64_t>>;
struct SliceParams {
  OptInts begin, end, step;
  static SliceParams Parse(AttrReader& a);
};
class StridedIndex;
// y[i] = x[base + map(i)] for y = slice(x): map walks y's index space with
// x's strides times step.
void SliceMap(const SliceParams& p, const Shape& x, int64_t* base, StridedIndex* map);

// softmax.cc (softmax, log_softmax)
struct SoftmaxParams {
  int64_t axis = -1;
  bool log = false;
};

// softmax_cross_entropy.cc
struct SceParams {
  double grad_scale = 1.0;
  std::string normalization = "batch";
  bool use_ignore = false;
  float ignore_label = -1;
  static SceParams Parse(AttrReader& a);
};

// transpose.cc
struct TransposeParams {
  std::vector<int64_t> axes;  // empty: reverse
  static TransposeParams Parse(AttrReader& a);
};

// grad_combine.cc
struct GradAccumulateParams {
  int64_t iter_size = 2;  // micro-batches per update
  static GradAccumulateParams Parse(AttrReader& a);
};
struct RescaleClipParams {
  int64_t num_args = 1;
  float rescale = 1;   // every gradient times this first (1 / iter_size)
  float max_norm = 0;  // then clipped to this global L2 norm; 0: no clipping
  static RescaleClipParams Parse(AttrReader& a);
};
// The rescaled gradients' global norm is summed per chunk of this many
// elements, the chunks in order (the same bits for any thread count); the
// workspace holds one double per chunk and the factor.
constexpr int64_t kNormChunk = 1 << 16;
int64_t NormChunks(const std::vector<Shape>& grads);

// optimizer_update.cc: one parameter's update by the solver's rule `kind`
// (frugal/optimizer.h), with the parameter's multipliers.
struct UpdateParams {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0, weight_decay = 0;  // sgd, nesterov: momentum
  float beta1 = 0, beta2 = 0, eps = 0;   // adam, adamw; rmsprop: eps
  float rho = 0;                         // rmsprop
  bool centered = false;                 // rmsprop
  float lr_mult = 1, wd_mult = 1;
};
// The scalars of the elementwise rule (frugal/update_rule.h) for the
// scheduled rate lr (before lr_mult) and update `step` (from 1).
UpdateArgs UpdateArgsFor(const UpdateParams& p, float lr, int64_t step);

}  // namespace frugal
