// embedding:  y[..., :] = W[index[...], :]
//   data: any shape, row indices stored as floats (whole numbers in
//   [0, input_dim)); weight W: (input_dim, output_dim), made as
//   "<node>_weight" when the config leaves it out; y: data.shape + (output_dim,)
//   An index that is not a whole number in range is an Error naming the node.
// grad:  dW[k, :] = sum of dy[i, :] over the positions i whose index is k
//        ddata = 0 (indices are piecewise constant)          reads dy, data
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

void EmbeddingInferShape(ShapeCtx& c) {
  const auto& p = c.params<EmbeddingParams>();
  const Shape& data = c.in[0];
  if (!data.known()) c.Fail("the shape of input data is unknown");
  const Shape w{p.input_dim, p.output_dim};
  if (!c.in[1].known()) c.in[1] = w;
  if (c.in[1] != w) {
    c.Fail(
        Fmt("weight has shape ", c.in[1], " but input_dim=", p.input_dim, ", output_dim=", p.output_dim, " need ", w));
  }
  std::vector<int64_t> y = data.dims();
  y.push_back(p.output_dim);
  c.out[0] = Shape(y);
}

// Row indices from the float data; throws Error naming the node on a bad one.
std::vector<int64_t> Rows(const KernelCtx& c, const Tensor& data, int64_t input_dim) {
  std::vector<int64_t> rows(data.size());
  const float* d = data.f();
  for (int64_t i = 0; i < data.size(); ++i) {
    FRUGAL_REQUIRE(d[i] >= 0 && d[i] < input_dim && d[i] == std::floor(d[i]), c.node.Where(), ": index ", d[i],
                   " at position ", i, " is not a row of the weight (whole numbers in [0, ", input_dim,
                   "); is input_dim large enough?)");
    rows[i] = static_cast<int64_t>(d[i]);
  }
  return rows;
}

void EmbeddingForward(const KernelCtx& c) {
  const auto& p = c.params<EmbeddingParams>();
  const std::vector<int64_t> rows = Rows(c, c.in[0], p.input_dim);
  const float* w = c.in[1].f();
  const int64_t d = p.output_dim;
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [&](int64_t e) { return w[rows[e / d] * d + e % d]; });
}

// inputs: dy, data    outputs: ddata (zeros), dweight
void EmbeddingBackward(const KernelCtx& c) {
  const auto& p = c.params<EmbeddingParams>();
  const std::vector<int64_t> rows = Rows(c, c.in[1], p.input_dim);
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [](int64_t) { return 0.f; });
  if (c.req[1] == OpReq::kNull) return;
  const int64_t d = p.output_dim;
  const float* dy = c.in[0].f();
  float* dw = Out(c, 1);
  if (c.req[1] == OpReq::kWrite) ForEach(c.out[1].size(), dw, OpReq::kWrite, [](int64_t) { return 0.f; });
  // Columns are independent: threads take blocks of columns, and every
  // block visits the rows in order (the same sums whatever the threads).
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for if (c.in[0].size() > kParallelGrain) schedule(static)
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const int64_t j0 = jb * kBlock, j1 = std::min(d, j0 + kBlock);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t j = j0; j < j1; ++j) dw[rows[i] * d + j] += dy[i * d + j];
  }
}

}  // namespace

EmbeddingParams EmbeddingParams::Parse(AttrReader& a) {
  EmbeddingParams p;
  p.input_dim = a.Int("input_dim");
  p.output_dim = a.Int("output_dim");
  FRUGAL_REQUIRE(p.input_dim > 0 && p.output_dim > 0, a.where(), ": input_dim and output_dim must be positive, got ",
                 p.input_dim, " and ", p.output_dim);
  return p;
}

void Register_embedding(OpRegistry* r) {
  OpDef& fwd = r->Add("embedding")
                   .Doc("Looks up rows of weight (input_dim, output_dim) by the float indices in data.")
                   .Inputs({{"data"}, {"weight", VarKind::kParam, "xavier"}})
                   .Outputs({"y"})
                   .Params<EmbeddingParams>()
                   .IndexInput([](const std::any& p) { return std::any_cast<const EmbeddingParams&>(p).input_dim; })
                   .InferShape(EmbeddingInferShape)
                   .Recompute(Cost::kCheap)
                   .CpuKernel(EmbeddingForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0)}, "dweight[k] = sum of dy over the positions holding index k; ddata = 0.")
      .CpuKernel(EmbeddingBackward);
}

}  // namespace frugal
