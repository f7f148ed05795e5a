#include "ops/cpu/vec.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <initializer_list>
#include <string>

#include "ops/cpu/kernel_names.h"

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
  static const std::string name = std::string("vec:") + k->isa;
  NoteKernel(name.c_str());
  return *k;
}

double PeakGflops(int threads) {
  static std::mutex mu;
  static std::map<int, double> measured;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = measured.find(threads); it != measured.end()) return it->second;
  // GFLOP/s of `steps` steps on each thread at once (every thread OpenMP
  // gives; one without it), and the seconds they took.
  auto run = [&](int64_t steps, double* seconds) {
    double flops = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    flops += Vec().peak_fma(steps);
    *seconds = std::max(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1e-9);
    return flops / *seconds * 1e-9;
  };
  constexpr int64_t kProbe = 100000;
  double seconds = 0;
  const double probe = run(kProbe, &seconds);
  const int64_t steps = std::max<int64_t>(kProbe, static_cast<int64_t>(kProbe * 0.02 / seconds));  // about 20 ms
  return measured[threads] = std::max(probe, run(steps, &seconds));
}

}  // namespace frugal::cpu
