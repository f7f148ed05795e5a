// The unary ops of elemwise_unary.cc on the GPU (negative, exp, ..., gelu), and
// their gradients: the functions of ops/unary_math.h, as on the CPU
// (src/ops/elemwise_unary.cc).
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"
#include "ops/unary_math.h"

namespace frugal {
namespace {

using namespace unary;  // NOLINT: the functions of unary_math.h, named as the ops

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
  SetCudaKernels(r, name, UnaryForwardCuda<Op>, UnaryBackwardCuda<Op>);
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
  RegisterUnaryCuda<Sin>(r, "sin");
  RegisterUnaryCuda<Cos>(r, "cos");
  RegisterUnaryCuda<Tan>(r, "tan");
  RegisterUnaryCuda<Asin>(r, "arcsin");
  RegisterUnaryCuda<Acos>(r, "arccos");
  RegisterUnaryCuda<Atan>(r, "arctan");
  RegisterUnaryCuda<Sinh>(r, "sinh");
  RegisterUnaryCuda<Asinh>(r, "arcsinh");
  RegisterUnaryCuda<Acosh>(r, "arccosh");
  RegisterUnaryCuda<Atanh>(r, "arctanh");
  RegisterUnaryCuda<Floor>(r, "floor");
  RegisterUnaryCuda<Ceil>(r, "ceil");
  RegisterUnaryCuda<Round>(r, "round");
  RegisterUnaryCuda<Sign>(r, "sign");
  RegisterUnaryCuda<Gelu>(r, "gelu");
}

}  // namespace frugal
