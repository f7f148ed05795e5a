// vec.h's kernels for avx2 (CMake sets this file's -m flags).
#define FRUGAL_VEC_NS avx2
#define FRUGAL_VEC_ISA "avx2"
#include "ops/cpu/vec_kernels.inc"
