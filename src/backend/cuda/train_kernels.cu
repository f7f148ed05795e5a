// The training loop's work on a GPU outside the graphs (backend/device.h):
// copies of batches and outputs on the GPU's stream. The optimizer updates,
// gradient sums and clipping are ops (src/ops/cuda/optimizer_update.cu,
// grad_combine.cu).
#include "backend/device.h"
#include "backend/cuda/cuda_util.h"

namespace frugal::backend {

void CopyAsync(cuda::Context* context, void* dst, Device dst_dev, const void* src, Device src_dev, int64_t bytes) {
  if (bytes == 0) return;
  FRUGAL_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cuda::CopyKind(dst_dev, src_dev), context->stream));
}

}  // namespace frugal::backend
