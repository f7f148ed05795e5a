#include "backend/cpu/parallel.h"
#include "frugal/train.h"

namespace frugal {

void SgdUpdate(const SgdOptions& o, Tensor* w, const Tensor& g, Tensor* m) {
  float* wp = w->f();
  float* mp = m->f();
  const float* gp = g.f();
  const int64_t n = w->size();
  const int threads = cpu::KernelThreads();
  (void)threads;  // unused where OpenMP is off
#pragma omp parallel for num_threads(threads) if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    mp[i] = o.momentum * mp[i] - o.lr * (gp[i] + o.weight_decay * wp[i]);
    wp[i] += mp[i];
  }
}

}  // namespace frugal
