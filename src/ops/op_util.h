// Helpers shared by op files: common shape rules and elementwise loops.
#pragma once

#include <cstdint>

#include "backend/cpu/parallel.h"
#include "frugal/op.h"

namespace frugal {

// Every input and every output has the shape of input 0.
void InferSameShape(ShapeCtx& c);
// Backward ops: output i has the shape of the forward node's input i.
void InferAsForwardInputs(ShapeCtx& c);

// y[i] = f(i) for i in [0, n), honouring req; parallel over elements with
// at most the kernel threads the engine gave this thread.
template <typename F>
void ForEach(int64_t n, float* y, OpReq req, F f) {
  if (req == OpReq::kNull) return;
  const int threads = cpu::KernelThreads();
  (void)threads;  // unused where OpenMP is off (the ThreadSanitizer build)
  if (req == OpReq::kAdd) {
#pragma omp parallel for num_threads(threads) if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] += f(i);
  } else {
#pragma omp parallel for num_threads(threads) if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = f(i);
  }
}

}  // namespace frugal
