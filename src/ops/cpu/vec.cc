#include "ops/cpu/vec.h"

#include <cstring>
#include <initializer_list>

namespace frugal::cpu {
#if defined(FRUGAL_VEC_X86)
namespace avx512 {
const VecKernels& Kernels();
}
namespace avx2 {
const VecKernels& Kernels();
}
#endif
namespace sse2 {
const VecKernels& Kernels();
}

const VecKernels* VecFor(const char* isa) {
#if defined(FRUGAL_VEC_X86)
  __builtin_cpu_init();
  if (std::strcmp(isa, "avx512") == 0) {
    const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return ok ? &avx512::Kernels() : nullptr;
  }
  if (std::strcmp(isa, "avx2") == 0) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2::Kernels() : nullptr;
  }
#endif
  return std::strcmp(isa, "sse2") == 0 ? &sse2::Kernels() : nullptr;
}

const VecKernels& Vec() {
  static const VecKernels* const k = [] {
    for (const char* isa : {"avx512", "avx2"}) {
      if (const VecKernels* v = VecFor(isa)) return v;
    }
    return VecFor("sse2");
  }();
  return *k;
}

}  // namespace frugal::cpu
