// reshape, flatten, expand_dims and their gradient on the GPU: copies, or
// nothing when the planner ran them in place (src/ops/reshape.cc).
#include "ops/cuda/cuda_op_util.h"

namespace frugal {

void RegisterCuda_reshape(OpRegistry* r) {
  for (const char* op : {"reshape", "flatten", "expand_dims", "_backward_reshape"})
    r->Existing(op).CudaKernel(CopyForwardCuda);
}

}  // namespace frugal
