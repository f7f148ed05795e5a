// Elementwise kernels built once per instruction set and chosen when first
// used, from what the CPU supports: AVX-512, AVX2 + FMA, or baseline x86-64
// (SSE2). The rest of frugal is built for baseline x86-64 so that one
// binary runs everywhere; these loops are where the vector width pays.
//
// vec_kernels.inc is compiled three times (vec_avx512.cc, vec_avx2.cc,
// vec_sse2.cc, each with its own -m flags, -O3, -ffp-contract=off and
// -fno-trapping-math, which lets GCC turn the selects in sigmoid and tanh
// into vector blends).
// Every ISA gives the same bits: no contraction into FMA, and sums run in
// 16 fixed lanes added in a fixed order whatever the register width.
//
// Each function works on one contiguous range; callers split the work over
// threads (ForEachRange in ops/op_util.h). `add` accumulates into the output
// instead of overwriting it (OpReq::kAdd). In-place use (the output being
// an input) is allowed.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/cpu/philox.h"      // PhiloxKey
#include "frugal/op.h"           // OpReq
#include "frugal/update_rule.h"  // UpdateArgs

namespace frugal::cpu {

// One fused LSTM cell's tensors seen from (row b, column j) on (src/ops/
// lstm_cell.cc): the gates' tensors are (B, 4H) with gate k at k hid, the
// state's (B, H). Unrequested outputs (and in the forward the gradients)
// are null; outputs honour their OpReq.
struct LstmColumns {
  int64_t hid = 0;
  const float *i2h = nullptr, *h2h = nullptr, *c_prev = nullptr, *dh = nullptr, *dc = nullptr, *act = nullptr;
  float *h = nullptr, *c = nullptr, *gates = nullptr, *da = nullptr, *dc_prev = nullptr;
  OpReq req_h = OpReq::kNull, req_c = OpReq::kNull, req_gates = OpReq::kNull, req_da = OpReq::kNull,
        req_dc_prev = OpReq::kNull;
};
// The most columns one lstm_forward / lstm_backward call takes.
constexpr int64_t kLstmChunk = 128;

// The kernels over activations, for one element type T: float (float32), or
// uint16_t (bfloat16 bits, frugal/bf16.h) for mixed-precision graphs. The
// bfloat16 kernels widen each element exactly, do the float32 kernel's
// arithmetic in float, and round only what they store (with `add`,
// y = round(float(y) + v)): so their result is the float32 kernel's result
// on the same values, rounded to bfloat16. Sums return float either way.
template <typename T>
struct ActKernels {
  // y = x > 0 ? x : 0
  void (*relu)(const T* x, T* y, int64_t n, bool add);
  // dx = y > 0 ? dy : 0
  void (*relu_grad)(const T* dy, const T* y, T* dx, int64_t n, bool add);
  // y = a x + b, then y > 0 ? y : 0 with relu
  void (*affine)(const T* x, float a, float b, bool relu, T* y, int64_t n, bool add);
  // The sum of x[0, n) and the sum of (x - m)^2.
  float (*sum)(const T* x, int64_t n);
  float (*sq_dev_sum)(const T* x, float m, int64_t n);
  // With g = dy, or with relu, g = (a x + b > 0 ? dy : 0) (the gradient
  // through the ReLU that followed y = a x + b): *sum_g = sum g and
  // *sum_gx = sum g (x - m).
  void (*affine_grad_sums)(const T* dy, const T* x, float m, bool relu, float a, float b, int64_t n, float* sum_g,
                           float* sum_gx);
  // dx = k (g - c - (x - m) q), g as above.
  void (*affine_grad)(const T* dy, const T* x, float m, bool relu, float a, float b, float k, float c, float q, T* dx,
                      int64_t n, bool add);
  // y = x[0] + x[1] + ... + x[k - 1]
  void (*add_n)(const T* const* x, int k, T* y, int64_t n, bool add);

  // Column kernels, for channels-last (N, H, W, C) activations seen as rows
  // of channels: `rows` rows of `cols` channels each, consecutive rows `ld`
  // elements apart (cols <= ld; ld = C with cols a block of the channels).
  // Column (channel) j is x[j], x[ld + j], x[2 ld + j], ...; the per-channel
  // arrays (m, a, b, k, c, q, out, sum_g, sum_gx) hold cols floats. Each
  // column gets the bits of the contiguous kernel above on that column laid
  // out contiguously with the scalars taken from the arrays: the sums put
  // row r in lane r % 16 as `sum` puts element r there, vectorised across
  // channels, so a channel-last tensor gives the plain layout's bits.
  // out[j] = sum(column j)
  void (*col_sum)(const T* x, int64_t rows, int64_t cols, int64_t ld, float* out);
  // out[j] = sq_dev_sum(column j, m[j])
  void (*col_sq_dev_sum)(const T* x, const float* m, int64_t rows, int64_t cols, int64_t ld, float* out);
  // affine on every column j with a[j], b[j] (y laid out as x; may be x)
  void (*col_affine)(const T* x, const float* a, const float* b, bool relu, T* y, int64_t rows, int64_t cols,
                     int64_t ld, bool add);
  // affine_grad_sums on every column j: sum_g[j], sum_gx[j] with m[j], a[j], b[j]
  void (*col_affine_grad_sums)(const T* dy, const T* x, const float* m, bool relu, const float* a, const float* b,
                               int64_t rows, int64_t cols, int64_t ld, float* sum_g, float* sum_gx);
  // affine_grad on every column j with m[j], a[j], b[j], k[j], c[j], q[j]
  // (dx laid out as x; may be dy)
  void (*col_affine_grad)(const T* dy, const T* x, const float* m, bool relu, const float* a, const float* b,
                          const float* k, const float* c, const float* q, T* dx, int64_t rows, int64_t cols, int64_t ld,
                          bool add);
};

struct VecKernels {
  const char* isa;            // "avx512", "avx2" or "sse2"
  ActKernels<float> f32;      // float32 activations
  ActKernels<uint16_t> bf16;  // bfloat16 activations (their bits)
  // The activation kernels for T (float or uint16_t), for ops written once
  // over the element type.
  template <typename T>
  const ActKernels<T>& act() const {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t>, "float32 or bfloat16 bits");
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return bf16;
    }
  }
  // n <= kLstmChunk columns of one row of an LSTM cell. Forward: gates i, f,
  // g, o = sigmoid, sigmoid, tanh, sigmoid of i2h + h2h; c = f c_prev + i g;
  // h = o tanh(c); the gates stored (they may alias i2h or h2h). Backward:
  // from dh, dc, the stored gates (act) and c_prev, da (the gradient of the
  // pre-activations) and dc_prev.
  void (*lstm_forward)(const LstmColumns& r, int64_t n);
  void (*lstm_backward)(const LstmColumns& r, int64_t n);
  // n elements of one parameter's optimizer update (frugal/update_rule.h's
  // UpdateElement, the optimizer's switch taken once per call).
  void (*update)(const UpdateArgs& a, float* w, const float* g, float* s0, float* s1, int64_t n);
  // y = exp(x - m) (Cephes' expf), exactly 0 where x - m < -87 (a masked
  // score, -inf, gives 0); returns the sum of y in 16 lanes. In place allowed.
  float (*exp_shift)(const float* x, float m, float* y, int64_t n);
  // y = gelu(x) and dx = dy gelu'(x) (base/float_math.h), exact or in tanh form.
  void (*gelu)(const float* x, float* y, int64_t n, bool tanh_form, bool add);
  void (*gelu_grad)(const float* dy, const float* x, float* dx, int64_t n, bool tanh_form, bool add);
  // Philox-4x32-10 blocks b0 .. b0 + n - 1 of a stream (CounterStream::Block
  // for its key and step): block b0 + i's four words at out[4 i .. 4 i + 3].
  void (*philox_blocks)(PhiloxKey key, uint64_t step, uint64_t b0, int64_t n, uint32_t* out);
  // `steps` steps of independent multiply-add chains, one register wide,
  // at the ISA's peak (PeakGflops times it); returns the FLOPs done.
  double (*peak_fma)(int64_t steps);
};

// The arithmetic peak of `threads` threads (each running Vec().peak_fma at
// once for about 20 ms), in GFLOP/s: measured once per thread count in a
// process.
double PeakGflops(int threads);

// The kernels for this CPU (chosen once).
const VecKernels& Vec();

// The kernels of one instruction set, or nullptr where this build or this
// CPU lacks it: "avx512", "avx2", "sse2" (tests compare them).
const VecKernels* VecFor(const char* isa);

}  // namespace frugal::cpu
