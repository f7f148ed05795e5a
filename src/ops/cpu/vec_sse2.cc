// vec.h's kernels for sse2 (CMake sets this file's -m flags).
#define FRUGAL_VEC_NS sse2
#define FRUGAL_VEC_ISA "sse2"
#include "ops/cpu/vec_kernels.inc"
