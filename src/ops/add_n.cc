// add_n:  y = x_0 + x_1 + ... + x_{n-1}     all the same shape
// grad:   dx_i = dy                        reads only dy
// The gradient pass uses add_n to sum the gradients of an entry read by
// several nodes. Kernel: vec.h's add_n, float32 or bfloat16.
#include "ops/cpu/vec.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

struct AddNParams {
  int64_t num_args = 2;
  static AddNParams Parse(AttrReader& a);
};

// Written once over the element type T: float, or uint16_t for bfloat16
// (summed in float, rounded once when stored); every input and y share it.
template <typename T>
void AddNForwardT(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const int n = static_cast<int>(c.in.size());
  T* y = Elems<T>(c.out[0]);
  const bool add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(), [&](int64_t b, int64_t e) {
    std::vector<const T*> x(n);
    for (int k = 0; k < n; ++k) x[k] = Elems<T>(c.in[k]) + b;
    cpu::Vec().act<T>().add_n(x.data(), n, y + b, e - b, add);
  });
}

// float32 unless bfloat16 (Elems fails loudly on other dtypes).
void AddNForward(const KernelCtx& c) {
  c.in[0].dtype() == DType::kBFloat16 ? AddNForwardT<uint16_t>(c) : AddNForwardT<float>(c);
}

}  // namespace

AddNParams AddNParams::Parse(AttrReader& a) {
  AddNParams p;
  p.num_args = a.Int("num_args", 2);
  FRUGAL_REQUIRE(p.num_args >= 1, a.where(), ": num_args must be at least 1, got ", p.num_args);
  return p;
}

void Register_add_n(OpRegistry* r) {
  r->Add("add_n")
      .Doc("Sum of num_args tensors of one shape.")
      .Unary()
      .Params<AddNParams>()
      .NumInputsFn([](const std::any& p) { return static_cast<int>(std::any_cast<const AddNParams&>(p).num_args); })
      .InferShape(InferSameShape)
      .SumsInputs()
      .Backward({OutGrad(0)})
      .Gradient([](Graph&, const GradCtx& c) { return std::vector<Entry>(c.inputs.size(), c.out_grads[0]); })
      .Inplace({{0, 0}})
      .Recompute(Cost::kCheap)
      .Bf16()
      .ChannelsLast({OpDef::kAllSlots}, {0}, /*tied=*/true)  // elementwise: any order of the bytes
      .CpuKernel(AddNForward);
}

}  // namespace frugal
