// add, sub, mul, div, maximum, minimum, power on the GPU with numpy
// broadcasting (src/ops/elemwise_binary.cc).
#include "ops/cuda/cuda_op_util.h"

namespace frugal {
namespace {

struct Add {
  __device__ static float F(float a, float b) { return a + b; }
  __device__ static float Da(float dy, float, float) { return dy; }
  __device__ static float Db(float dy, float, float) { return dy; }
};
struct Sub {
  __device__ static float F(float a, float b) { return a - b; }
  __device__ static float Da(float dy, float, float) { return dy; }
  __device__ static float Db(float dy, float, float) { return -dy; }
};
struct Mul {
  __device__ static float F(float a, float b) { return a * b; }
  __device__ static float Da(float dy, float, float b) { return dy * b; }
  __device__ static float Db(float dy, float a, float) { return dy * a; }
};
struct Div {
  __device__ static float F(float a, float b) { return a / b; }
  __device__ static float Da(float dy, float, float b) { return dy / b; }
  __device__ static float Db(float dy, float a, float b) { return -dy * a / (b * b); }
};
struct Maximum {
  __device__ static float F(float a, float b) { return a >= b ? a : b; }
  __device__ static float Da(float dy, float a, float b) { return a >= b ? dy : 0.f; }
  __device__ static float Db(float dy, float a, float b) { return a >= b ? 0.f : dy; }
};
struct Minimum {
  __device__ static float F(float a, float b) { return a <= b ? a : b; }
  __device__ static float Da(float dy, float a, float b) { return a <= b ? dy : 0.f; }
  __device__ static float Db(float dy, float a, float b) { return a <= b ? 0.f : dy; }
};
struct Power {
  __device__ static float F(float a, float b) { return powf(a, b); }
  __device__ static float Da(float dy, float a, float b) { return dy * b * powf(a, b - 1); }
  __device__ static float Db(float dy, float a, float b) { return a > 0 ? dy * powf(a, b) * logf(a) : 0.f; }
};

// Where element i of the output y reads a broadcast input of shape x.
cuda::DevIndex Reads(const KernelCtx& c, const Shape& x, const Shape& y) {
  return cuda::ToDevice(c, BroadcastIndex(x, y));
}

template <typename Op>
void BinaryForwardCuda(const KernelCtx& c) {
  const float *a = c.in[0].f(), *b = c.in[1].f();
  const Shape& y = c.out[0].shape();
  if (c.in[0].shape() == y && c.in[1].shape() == y) {
    cuda::Map(c, 0, [a, b] __device__(int64_t i) { return Op::F(a[i], b[i]); });
    return;
  }
  const cuda::DevIndex ia = Reads(c, c.in[0].shape(), y), ib = Reads(c, c.in[1].shape(), y);
  cuda::Map(c, 0, [=] __device__(int64_t i) { return Op::F(a[ia(i)], b[ib(i)]); });
}

// Output k of the backward (da or db, of shape x): g(o) at every element o
// of y, summed over the dims x broadcasts along (in double, in a fixed order
// per output element, as the CPU's SumToShape).
template <typename G>
void SumToShapeCuda(const KernelCtx& c, int k, const Shape& x, const Shape& y, G g) {
  if (c.req[k] == OpReq::kNull) return;
  if (x.Size() == y.Size()) return cuda::Map(c, k, g);
  const Reduction red = BroadcastReduction(x, y);
  const cuda::DevIndex kept = cuda::ToDevice(c, red.kept), folded = cuda::ToDevice(c, red.folded);
  const int64_t n = red.folded.size();
  cuda::Map(c, k, [=] __device__(int64_t j) {
    const int64_t base = kept(j);
    double s = 0;
    for (int64_t r = 0; r < n; ++r) s += g(base + folded(r));
    return static_cast<float>(s);
  });
}

// inputs: dy[, a, b]    outputs: da, db; db first: da may overwrite dy.
template <typename Op, bool kReadsInputs>
void BinaryBackwardCuda(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const Shape& y = c.in[0].shape();
  if (!kReadsInputs) {
    SumToShapeCuda(c, 1, c.out[1].shape(), y, [=] __device__(int64_t o) { return Op::Db(dy[o], 0.f, 0.f); });
    SumToShapeCuda(c, 0, c.out[0].shape(), y, [=] __device__(int64_t o) { return Op::Da(dy[o], 0.f, 0.f); });
    return;
  }
  const Shape &sa = c.in[1].shape(), &sb = c.in[2].shape();
  const float* a = c.in[1].f();
  const float* b = c.in[2].f();
  const cuda::DevIndex ia = Reads(c, sa, y), ib = Reads(c, sb, y);
  SumToShapeCuda(c, 1, sb, y, [=] __device__(int64_t o) { return Op::Db(dy[o], a[ia(o)], b[ib(o)]); });
  SumToShapeCuda(c, 0, sa, y, [=] __device__(int64_t o) { return Op::Da(dy[o], a[ia(o)], b[ib(o)]); });
}

template <typename Op, bool kReadsInputs>
void RegisterBinaryCuda(OpRegistry* r, const std::string& name) {
  SetCudaKernels(r, name, BinaryForwardCuda<Op>, BinaryBackwardCuda<Op, kReadsInputs>);
}

}  // namespace

void RegisterCuda_elemwise_binary(OpRegistry* r) {
  RegisterBinaryCuda<Add, false>(r, "add");
  RegisterBinaryCuda<Sub, false>(r, "sub");
  RegisterBinaryCuda<Mul, true>(r, "mul");
  RegisterBinaryCuda<Div, true>(r, "div");
  RegisterBinaryCuda<Maximum, true>(r, "maximum");
  RegisterBinaryCuda<Minimum, true>(r, "minimum");
  RegisterBinaryCuda<Power, true>(r, "power");
}

}  // namespace frugal
