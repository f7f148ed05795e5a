// How many threads a kernel may use on the calling thread. The threaded
// engine sets this on each of its workers (cores / workers), so that engine
// workers and their OpenMP teams (oneDNN's included) never ask for more
// cores than there are; any other thread (the naive engine runs kernels on
// the caller's) may use every core.
#pragma once

#include <atomic>
#include <cstdint>

namespace frugal::cpu {

// CPUs this process may run on (its affinity mask at first call), at least 1.
int NumCores();

// The last-level cache's bytes (sysfs's largest level, else sysconf's L3 or
// L2), 8 MiB where the system does not say.
int64_t LastLevelCacheBytes();

// Threads a kernel may use on this thread: what SetKernelThreads set here,
// else NumCores().
int KernelThreads();

// Sets this thread's kernel threads, and its OpenMP default team size, so
// that plain `#pragma omp parallel` regions in kernels follow it too.
void SetKernelThreads(int n);

// Sets flush-to-zero and denormals-are-zero on the calling thread and, once
// per thread, on the OpenMP threads of its team (new ones inherit the mode
// of the thread that starts them). Denormal gradients otherwise slow
// oneDNN's kernels down 8-70x (a convolution's weight gradient measured
// 2.75 ms against 0.32 ms); TensorFlow's compute threads run so too. Both
// engines call it on the threads that run kernels (the naive engine, which
// runs them on the caller's thread, restores the caller's mode after each).
void FlushDenormals();
// The calling thread's floating-point mode (MXCSR on x86), to restore later.
unsigned FpMode();
void SetFpMode(unsigned mode);

// A barrier for the threads of one OpenMP region that spins (then yields)
// instead of sleeping: with OMP_WAIT_POLICY=PASSIVE, which frugal runs
// under, OpenMP's own barriers and every new region put the threads to
// sleep and wake them through the kernel, about 50 us each on this machine,
// more than a pass over a ResNet activation takes. Wait(n) returns when n
// threads have called it; reusable.
class SpinBarrier {
 public:
  void Wait(int n);

 private:
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

}  // namespace frugal::cpu
