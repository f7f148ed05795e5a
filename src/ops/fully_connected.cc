// fully_connected:  y = x W^T + b
//   x: (N, K) after flattening (flatten=true: N = dim 0, K = the rest;
//      flatten=false: K = last dim, N = the rest), W: (M, K), b: (M,), y: (N, M)
// grad:  dx = dy W        dW = dy^T x        db = sum over rows of dy
//        reads dy, x and W (not b, not y)
// Kernels: float32, sgemm (OpenBLAS). bfloat16 x (a config's cast: x, y,
// dy and dx bfloat16; W, b, dW and db float32): oneDNN matmul, whose reorder
// of W into the primitive's layout converts it, with dW written in float32
// by a bfloat16 x bfloat16 -> float32 product (Debian's OpenBLAS has no
// bfloat16 GEMM). kAdd (AddTo: an unrolled RNN's weight gradient summed in
// its GEMM) is a post-op sum. The op is not declared Bf16, so mixed
// precision leaves it in float32: converting W at every call cost more than
// the bfloat16 product saved where the batch is small against W (the
// unrolled LSTM 2x256 b32 T=1000: 3.83 s a step against 2.38 s in float32).
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/dnnl.h"
#include "frugal/bf16.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// Rows N and columns K of x as the op sees it.
void RowsCols(const FcParams& p, const Shape& x, int64_t* n, int64_t* k) {
  int split = p.flatten ? 1 : x.ndim() - 1;
  *n = x.Prod(0, split);
  *k = x.Prod(split, x.ndim());
}

void FcInferShape(ShapeCtx& c) {
  const auto& p = c.params<FcParams>();
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  if (x.ndim() < 1 || (!p.flatten && x.ndim() < 2)) c.Fail(Fmt("x has shape ", x, "; expected at least 2 dims"));
  int64_t n, k;
  RowsCols(p, x, &n, &k);
  Shape w{p.num_hidden, k};
  if (!c.in[1].known()) c.in[1] = w;
  if (c.in[1] != w) {
    c.Fail(Fmt("weight has shape ", c.in[1], " but x ", x, " needs ", w, " (num_hidden=", p.num_hidden, ", ", k,
               " input features)"));
  }
  if (!p.no_bias) {
    if (!c.in[2].known()) c.in[2] = Shape{p.num_hidden};
    if (c.in[2] != Shape{p.num_hidden}) c.Fail(Fmt("bias has shape ", c.in[2], " but num_hidden is ", p.num_hidden));
  }
  std::vector<int64_t> y =
      p.flatten ? std::vector<int64_t>{x[0]} : std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1);
  y.push_back(p.num_hidden);
  c.out[0] = Shape(y);
}

// The bfloat16 kernels' oneDNN matmuls, each with a post-op sum twin for kAdd.
struct FcPrims {
  cpu::PlainCall fwd, bwd_data, bwd_weights;
};

FcPrims MakeFcPrims(int64_t n, int64_t k, int64_t m, bool bias) {
  cpu::RequireBf16();  // bfloat16 only
  using namespace dnnl;
  using tag = memory::format_tag;
  const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  const engine& eng = cpu::DnnlEngine();
  auto make = [&](const memory::desc& src, const memory::desc& wei, const memory::desc& b, const memory::desc& dst,
                  std::vector<cpu::PlainArg> args) {
    matmul::primitive_desc pd(matmul::desc(src, wei, b, dst), cpu::Attr(), eng);
    matmul::primitive_desc spd(matmul::desc(pd.src_desc(), pd.weights_desc(), b, dst), cpu::Attr(/*sum=*/true), eng);
    return cpu::PlainCall(pd, matmul(pd), std::move(args), matmul(spd));
  };
  const memory::desc none, x({n, k}, bf16, tag::ab), y({n, m}, bf16, tag::ab);
  const memory::desc b({1, m}, f32, tag::ab);
  // y = x W^T: W (m, k) row-major is W^T (k, m) in layout ba.
  const memory::desc wt_user({k, m}, f32, tag::ba), wt_any({k, m}, bf16, tag::any);
  std::vector<cpu::PlainArg> fargs{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wt_user}};
  if (bias) fargs.push_back({DNNL_ARG_BIAS, b});
  fargs.push_back({DNNL_ARG_DST, y, true});
  // dx = dy W: W (m, k) as it is; dW = dy^T x: dy (n, m) seen as (m, n) in layout ba.
  const memory::desc w_user({m, k}, f32, tag::ab), w_any({m, k}, bf16, tag::any);
  const memory::desc dy_t({m, n}, bf16, tag::ba), dw({m, k}, f32, tag::ab);
  return FcPrims{make(x, wt_any, bias ? b : none, y, fargs),
                 make(y, w_any, none, x, {{DNNL_ARG_SRC, y}, {DNNL_ARG_WEIGHTS, w_user}, {DNNL_ARG_DST, x, true}}),
                 make(dy_t, x, none, dw, {{DNNL_ARG_SRC, dy_t}, {DNNL_ARG_WEIGHTS, x}, {DNNL_ARG_DST, dw, true}})};
}

const FcPrims& Prims(const FcParams& p, const Shape& x) {
  int64_t n, k;
  RowsCols(p, x, &n, &k);
  return cpu::Cached<FcPrims>(Fmt("fully_connected", n, "x", k, "x", p.num_hidden, p.no_bias ? "" : "+b"),
                              [&] { return MakeFcPrims(n, k, p.num_hidden, !p.no_bias); });
}

// bfloat16 only: sgemm needs none.
int64_t FcForwardWorkspace(const WorkspaceCtx& c) {
  if (c.dtype != DType::kBFloat16) return 0;
  return Prims(c.params<FcParams>(), c.in[0]).fwd.WorkspaceBytes();
}

int64_t FcBackwardWorkspace(const WorkspaceCtx& c) {
  if (c.dtype != DType::kBFloat16) return 0;
  const FcPrims& k = Prims(c.params<FcParams>(), c.in[1]);
  return std::max(k.bwd_data.WorkspaceBytes(), k.bwd_weights.WorkspaceBytes());
}

void FcForward(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  if (c.req[0] == OpReq::kNull) return;
  if (c.in[0].dtype() == DType::kBFloat16) { return Prims(p, c.in[0].shape()).fwd.RunForward(c, !p.no_bias); }
  int64_t n, k;
  RowsCols(p, c.in[0].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  float* y = Out(c, 0);
  float beta = c.req[0] == OpReq::kAdd ? 1.f : 0.f;
  cpu::Gemm(false, true, n, m, k, 1.f, c.in[0].f(), c.in[1].f(), beta, y);  // y (+)= x W^T
  if (p.no_bias) return;
  const float* b = c.in[2].f();
#pragma omp parallel for if (n * m > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) y[i * m + j] += b[j];
}

// inputs: dy (N,M), x (N,K), W (M,K)    outputs: dx, dW[, db]
void FcBackward(const KernelCtx& c) {
  const auto& p = c.params<FcParams>();
  int64_t n, k;
  RowsCols(p, c.in[1].shape(), &n, &k);
  const int64_t m = p.num_hidden;
  const bool bf16 = c.in[0].dtype() == DType::kBFloat16;
  if (bf16) {
    const FcPrims& k = Prims(p, c.in[1].shape());
    void* dy = c.in[0].raw();
    const OpReq kIn = OpReq::kWrite;
    void* ws = Workspace(c);
    if (c.req[0] != OpReq::kNull) k.bwd_data.Run({dy, c.in[2].raw(), c.out[0].raw()}, {kIn, kIn, c.req[0]}, ws);
    if (c.req[1] != OpReq::kNull) k.bwd_weights.Run({dy, c.in[1].raw(), c.out[1].raw()}, {kIn, kIn, c.req[1]}, ws);
  } else {
    const float* dy = c.in[0].f();
    auto beta = [&](int i) { return c.req[i] == OpReq::kAdd ? 1.f : 0.f; };
    if (c.req[0] != OpReq::kNull) cpu::Gemm(false, false, n, k, m, 1.f, dy, c.in[2].f(), beta(0), Out(c, 0));
    if (c.req[1] != OpReq::kNull) cpu::Gemm(true, false, m, k, n, 1.f, dy, c.in[1].f(), beta(1), Out(c, 1));
  }
  if (p.no_bias || c.req[2] == OpReq::kNull) return;
  // db = the column sums of dy, each over the rows in order, accumulated a
  // row at a time (contiguous, so the loop vectorises; a loop down each
  // column strides by m).
  std::vector<float> sum(m, 0.f);
  auto column_sums = [&](auto load) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) sum[j] += load(i * m + j);
  };
  if (bf16) {
    const uint16_t* dy = c.in[0].bf16();
    column_sums([dy](int64_t i) { return Bf16ToFloat(dy[i]); });
  } else {
    const float* dy = c.in[0].f();
    column_sums([dy](int64_t i) { return dy[i]; });
  }
  ForEach(m, Out(c, 2), c.req[2], [&](int64_t j) { return sum[j]; });
}

}  // namespace

FcParams FcParams::Parse(AttrReader& a) {
  FcParams p;
  p.num_hidden = a.Int("num_hidden");
  p.no_bias = a.Bool("no_bias", false);
  p.flatten = a.Bool("flatten", true);
  FRUGAL_REQUIRE(p.num_hidden > 0, a.where(), ": num_hidden must be positive, got ", p.num_hidden);
  return p;
}

void Register_fully_connected(OpRegistry* r) {
  auto num_inputs = [](const std::any& p) { return std::any_cast<const FcParams&>(p).no_bias ? 2 : 3; };
  OpDef& fwd =
      r->Add("fully_connected")
          .Doc("Affine layer y = x W^T + b; num_hidden outputs, optional bias, flatten=true folds all but dim 0.")
          .Inputs({{"x"}, {"weight", VarKind::kParam, "xavier"}, {"bias", VarKind::kParam, "zero"}})
          .Outputs({"y"})
          .Params<FcParams>()
          .NumInputsFn(num_inputs)
          .InferShape(FcInferShape)
          .Recompute(Cost::kExpensive)
          .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>& out) {
            return 2.0 * out[0].Size() * in[1][1];  // N*M outputs, K multiply-adds each
          })
          .Workspace(FcForwardWorkspace)
          .CpuKernel(FcForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1)}, "dx = dy W, dW = dy^T x, db = sum(dy).")
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 4.0 * in[0].Size() * in[2][1];  // dx and dW: two products of N*M*K
      })
      .AddTo({0, 1, 2})
      .Workspace(FcBackwardWorkspace)
      .CpuKernel(FcBackward);
}

}  // namespace frugal
