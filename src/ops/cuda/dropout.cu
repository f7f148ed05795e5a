// dropout on the GPU: the mask comes from the same Philox counter stream as
// on the CPU (ops/cpu/philox.h, host and device), word i of the stream
// of (seed, node, step), so CPU and GPU masks agree and a recomputation on
// the GPU reproduces the forward bit for bit. See src/ops/dropout.cc.
#include <cmath>

#include "ops/cpu/philox.h"
#include "ops/cuda/cuda_op_util.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

// y = v * m * scale with m[i] = (word i >= threshold); forward v = x, backward v = dy.
void ApplyMaskCuda(const KernelCtx& c) {
  const auto& prm = c.params<DropoutParams>();
  const float* v = c.in[0].f();
  if (!c.is_train || prm.p == 0.f) {
    if (c.req[0] == OpReq::kWrite && v == Out(c, 0)) return;
    return cuda::Map(c, 0, [v] __device__(int64_t i) { return v[i]; });
  }
  const cpu::CounterStream stream(c.seed, c.node_key, c.step);
  const uint32_t threshold = static_cast<uint32_t>(std::ldexp(static_cast<double>(prm.p), 32));
  const float scale = 1.f / (1.f - prm.p);
  const int64_t first = c.data_part * c.out[0].size();  // element i draws word first + i (dropout.cc)
  cuda::Map(c, 0, [=] __device__(int64_t i) {
    const cpu::PhiloxCounter words = stream.Block(static_cast<uint64_t>((first + i) / 4));
    return words[(first + i) % 4] >= threshold ? v[i] * scale : 0.f;
  });
}

}  // namespace

void RegisterCuda_dropout(OpRegistry* r) { SetCudaKernels(r, "dropout", ApplyMaskCuda, ApplyMaskCuda); }

}  // namespace frugal
