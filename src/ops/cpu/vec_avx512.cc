// vec.h's kernels for avx512 (CMake sets this file's -m flags).
#define FRUGAL_VEC_NS avx512
#define FRUGAL_VEC_ISA "avx512"
#include "ops/cpu/vec_kernels.inc"
