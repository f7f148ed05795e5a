// negative, exp, log, sqrt, square, abs, clip, erf, gelu on the GPU, and
// their gradients (src/ops/elemwise_unary.cc; in float here, in double
// there for erf and gelu).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

// F: the function; D: dx from dy and the value backward reads (x or y).
struct Exp {
  __device__ static float F(float x, ClipParams) { return expf(x); }
  __device__ static float D(float dy, float y, ClipParams) { return dy * y; }
};
struct Log {
  __device__ static float F(float x, ClipParams) { return logf(x); }
  __device__ static float D(float dy, float x, ClipParams) { return dy / x; }
};
struct Sqrt {
  __device__ static float F(float x, ClipParams) { return sqrtf(x); }
  __device__ static float D(float dy, float y, ClipParams) { return dy / (2 * y); }
};
struct Square {
  __device__ static float F(float x, ClipParams) { return x * x; }
  __device__ static float D(float dy, float x, ClipParams) { return 2 * x * dy; }
};
struct Abs {
  __device__ static float F(float x, ClipParams) { return fabsf(x); }
  __device__ static float D(float dy, float x, ClipParams) { return x > 0 ? dy : x < 0 ? -dy : 0.f; }
};
struct Clip {
  __device__ static float F(float x, ClipParams p) { return fminf(fmaxf(x, p.a_min), p.a_max); }
  __device__ static float D(float dy, float y, ClipParams p) { return y > p.a_min && y < p.a_max ? dy : 0.f; }
};

struct Erf {
  __device__ static float F(float x, ClipParams) { return erff(x); }
  __device__ static float D(float dy, float x, ClipParams) { return dy * 1.1283791671f * expf(-x * x); }
};
struct Gelu {
  using Params = GeluParams;
  static constexpr float kSqrt2OverPi = 0.7978845608f, kCubic = 0.044715f, kSqrtHalf = 0.7071067812f;
  __device__ static float F(float x, GeluParams p) {
    if (p.tanh) return 0.5f * x * (1 + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
    return 0.5f * x * (1 + erff(x * kSqrtHalf));
  }
  __device__ static float D(float dy, float x, GeluParams p) {
    if (p.tanh) {
      const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
      return dy * (0.5f * (1 + t) + 0.5f * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kCubic * x * x));
    }
    const float phi = 0.3989422804f * expf(-0.5f * x * x);  // the normal density
    return dy * (0.5f * (1 + erff(x * kSqrtHalf)) + x * phi);
  }
};

template <typename Op>
void UnaryForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  const UnaryParams<Op> p = UnaryParamsFrom<Op>(c);
  cuda::Map(c, 0, [=] __device__(int64_t i) { return Op::F(x[i], p); });
}

// inputs: dy, x or y    output: dx
template <typename Op>
void UnaryBackwardCuda(const KernelCtx& c) {
  const float *dy = c.in[0].f(), *v = c.in[1].f();
  const UnaryParams<Op> p = UnaryParamsFrom<Op>(c);
  cuda::Map(c, 0, [=] __device__(int64_t i) { return Op::D(dy[i], v[i], p); });
}

void NegativeForwardCuda(const KernelCtx& c) {
  const float* x = c.in[0].f();
  cuda::Map(c, 0, [x] __device__(int64_t i) { return -x[i]; });
}

template <typename Op>
void RegisterUnaryCuda(OpRegistry* r, const std::string& name) {
  r->Existing(name).CudaKernel(UnaryForwardCuda<Op>);
  r->Existing("_backward_" + name).CudaKernel(UnaryBackwardCuda<Op>);
}

}  // namespace

void RegisterCuda_elemwise_unary(OpRegistry* r) {
  r->Existing("negative").CudaKernel(NegativeForwardCuda);
  RegisterUnaryCuda<Exp>(r, "exp");
  RegisterUnaryCuda<Log>(r, "log");
  RegisterUnaryCuda<Sqrt>(r, "sqrt");
  RegisterUnaryCuda<Square>(r, "square");
  RegisterUnaryCuda<Abs>(r, "abs");
  RegisterUnaryCuda<Clip>(r, "clip");
  RegisterUnaryCuda<Erf>(r, "erf");
  RegisterUnaryCuda<Gelu>(r, "gelu");
}

}  // namespace frugal
