// RegisterOps (frugal/op.h): every op of op_list.def, then in a CUDA build
// the CUDA kernels of cuda/cuda_op_list.def.
#include "frugal/op.h"

namespace frugal {

#define FRUGAL_OP(name) void Register_##name(OpRegistry* r);
#include "ops/op_list.def"
#undef FRUGAL_OP

#ifdef FRUGAL_WITH_CUDA
#define FRUGAL_CUDA_OP(name) void RegisterCuda_##name(OpRegistry* r);
#include "ops/cuda/cuda_op_list.def"
#undef FRUGAL_CUDA_OP
#endif

void RegisterOps(OpRegistry* r) {
#define FRUGAL_OP(name) Register_##name(r);
#include "ops/op_list.def"
#undef FRUGAL_OP
#ifdef FRUGAL_WITH_CUDA
#define FRUGAL_CUDA_OP(name) RegisterCuda_##name(r);
#include "ops/cuda/cuda_op_list.def"
#undef FRUGAL_CUDA_OP
#endif
}

}  // namespace frugal
