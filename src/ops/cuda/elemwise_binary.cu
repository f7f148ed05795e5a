// add, sub, mul, div on the GPU, for inputs of one shape (src/ops/elemwise_binary.cc).
// Broadcasting inputs are not yet supported on the GPU: the kernel throws an
// Error naming the node.
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

void RequireSameShape(const KernelCtx& c, const Shape& a, const Shape& b) {
  FRUGAL_REQUIRE(a == b, c.node.Where(), ": inputs of shapes ", a, " and ", b,
                 " broadcast, which the GPU kernel does not do yet; give both inputs one shape "
                 "(or run on the CPU)");
}

template <typename Op>
void BinaryForwardCuda(const KernelCtx& c) {
  RequireSameShape(c, c.in[0].shape(), c.in[1].shape());
  const float *a = c.in[0].f(), *b = c.in[1].f();
  cuda::Map(c, 0, [a, b] __device__(int64_t i) { return Op::F(a[i], b[i]); });
}

// inputs: dy[, a, b]    outputs: da, db; db first: da may overwrite dy.
template <typename Op, bool kReadsInputs>
void BinaryBackwardCuda(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const float* a = kReadsInputs ? c.in[1].f() : nullptr;
  const float* b = kReadsInputs ? c.in[2].f() : nullptr;
  if (kReadsInputs) RequireSameShape(c, c.in[1].shape(), c.in[2].shape());
  for (int k : {1, 0}) {
    if (c.req[k] == OpReq::kNull) continue;
    RequireSameShape(c, c.out[k].shape(), c.in[0].shape());
    if (k == 1) {
      cuda::Map(c, 1, [=] __device__(int64_t i) { return Op::Db(dy[i], a ? a[i] : 0.f, b ? b[i] : 0.f); });
    } else {
      cuda::Map(c, 0, [=] __device__(int64_t i) { return Op::Da(dy[i], a ? a[i] : 0.f, b ? b[i] : 0.f); });
    }
  }
}

template <typename Op, bool kReadsInputs>
void RegisterBinaryCuda(OpRegistry* r, const std::string& name) {
  r->Existing(name).CudaKernel(BinaryForwardCuda<Op>);
  r->Existing("_backward_" + name).CudaKernel(BinaryBackwardCuda<Op, kReadsInputs>);
}

}  // namespace

void RegisterCuda_elemwise_binary(OpRegistry* r) {
  RegisterBinaryCuda<Add, false>(r, "add");
  RegisterBinaryCuda<Sub, false>(r, "sub");
  RegisterBinaryCuda<Mul, true>(r, "mul");
  RegisterBinaryCuda<Div, true>(r, "div");
}

}  // namespace frugal
