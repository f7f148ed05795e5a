// FRUGAL_HD: __host__ __device__ under nvcc, nothing under a C++ compiler,
// for the functions that the CPU code and the CUDA kernels share
// (ops/cpu/philox.h, frugal/update_rule.h).
#pragma once

#ifdef __CUDACC__
#define FRUGAL_HD __host__ __device__
#else
#define FRUGAL_HD
#endif
