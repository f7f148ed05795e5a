// cast:  y = x in another element type (dtype: float32 or bfloat16; to
//        bfloat16 rounds to nearest even, to float32 is exact)    x, y: any shape
// grad:  dx = dy in x's type (_backward_cast)                      reads dy only
// ToMixedPrecision (src/passes/mixed_precision.cc) puts casts where a
// mixed-precision graph changes type; a config may use the op too.
// Kernel: one pass over memory with frugal/bf16.h's conversions, built for
// baseline x86-64 like the rest of the ops (not per ISA as vec.h's are): the
// data's cast into ResNet-56 b32 takes 0.29 ms for 98K elements.
#include "frugal/bf16.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

struct CastParams {
  DType dtype = DType::kFloat32;
  static CastParams Parse(AttrReader& a) {
    try {
      return {ParseComputeDType(a.Str("dtype", ""))};
    } catch (const Error& e) { throw Error(Fmt(a.where(), ": ", e.what())); }
  }
};

inline float Load(float v) { return v; }
inline float Load(uint16_t v) { return Bf16ToFloat(v); }
inline void Put(float v, float* y) { *y = v; }
inline void Put(float v, uint16_t* y) { *y = FloatToBf16(v); }

// y = x, or y += x with add (in float, then rounded to y's type).
template <typename From, typename To>
void Convert(const From* x, To* y, int64_t n, bool add) {
  if (add) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) Put(Load(y[i]) + Load(x[i]), y + i);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) Put(Load(x[i]), y + i);
  }
}

template <typename From>
void ConvertTo(const From* x, const Tensor& y, int64_t b, int64_t e, bool add) {
  if (y.dtype() == DType::kBFloat16) return Convert(x + b, y.bf16() + b, e - b, add);
  Convert(x + b, y.f() + b, e - b, add);
}

// inputs: x   output: y (forward: to dtype; backward: to the forward input's type)
void CastKernel(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const Tensor &x = c.in[0], &y = c.out[0];
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(y.size(), [&](int64_t b, int64_t e) {
    if (x.dtype() == DType::kBFloat16) return ConvertTo(x.bf16(), y, b, e, add);
    ConvertTo(x.f(), y, b, e, add);
  });
}

}  // namespace

void Register_cast(OpRegistry* r) {
  OpDef& fwd = r->Add("cast")
                   .Doc("y = x in another element type: dtype float32 or bfloat16 (rounded to nearest even).")
                   .Unary()
                   .Params<CastParams>()
                   .InferShape(InferSameShape)
                   .InferDType([](DTypeCtx& c) { c.out[0] = c.params<CastParams>().dtype; })  // any input type
                   .Recompute(Cost::kCheap)
                   .CpuKernel(CastKernel);
  AddBackward(r, fwd, {OutGrad(0)}, "dx = dy in x's element type.").CpuKernel(CastKernel);
}

}  // namespace frugal
