#include "backend/cpu/parallel.h"

#include <sched.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace frugal::cpu {
namespace {
thread_local int t_kernel_threads = 0;  // 0: not set on this thread
}  // namespace

int NumCores() {
  static const int cores = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return cores;
}

int64_t LastLevelCacheBytes() {
  // sysfs first: glibc's sysconf reads CPUID, which a virtual machine may
  // fill oddly (320 MiB of L3 on a 2-core AMD EPYC guest whose sysfs says 32).
  int64_t bytes = 0;
  int best_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    int64_t size = 0;
    std::string unit;
    if (!(level_file >> level) || !(size_file >> size) || level <= best_level || size <= 0) continue;
    size_file >> unit;
    best_level = level;
    bytes = unit == "M" ? size << 20 : unit == "K" ? size << 10 : size;
  }
  if (bytes > 0) return bytes;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
    if (const long size = sysconf(name); size > 0) return size;
  return int64_t{8} << 20;
}

int KernelThreads() { return t_kernel_threads > 0 ? t_kernel_threads : NumCores(); }

void SetKernelThreads(int n) {
  t_kernel_threads = std::max(1, n);
#ifdef _OPENMP
  omp_set_num_threads(t_kernel_threads);  // this thread's ICV only
#endif
}

unsigned FpMode() {
#if defined(__SSE__)
  return _mm_getcsr();
#else
  return 0;
#endif
}

void SetFpMode(unsigned mode) {
#if defined(__SSE__)
  _mm_setcsr(mode);
#endif
}

void FlushDenormals() {
#if defined(__SSE__)
  constexpr unsigned kFtzDaz = 0x8040;  // MXCSR: flush to zero (bit 15), denormals are zero (bit 6)
  _mm_setcsr(_mm_getcsr() | kFtzDaz);
  thread_local bool team_done = false;
  if (team_done) return;
  team_done = true;
#ifdef _OPENMP
#pragma omp parallel num_threads(NumCores())
  _mm_setcsr(_mm_getcsr() | kFtzDaz);
#endif
#endif
}

void SpinBarrier::Wait(int n) {
  if (n <= 1) return;
  const unsigned gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return;
  }
  for (int spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins) {
    if (spins < 20000) {
      _mm_pause();
    } else {
      std::this_thread::yield();  // the other thread is not running: let it
    }
  }
}

}  // namespace frugal::cpu
