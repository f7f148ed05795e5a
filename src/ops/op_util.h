// Helpers shared by op files: common shape rules, elementwise loops, and the
// index maps behind broadcasting, reductions, slicing and transposes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/cpu/parallel.h"
#include "frugal/op.h"

namespace frugal {

// Backward ops: output i has the shape of the forward node's input i.
void InferAsForwardInputs(ShapeCtx& c);

// Registers fwd's backward op, "_backward_<fwd>", and makes a node of it,
// reading `reads`, the gradient of every fwd node (fwd.Backward). What it
// derives from fwd: its inputs, named after what they read ("d" + an output's
// name for that output's gradient), those of the reads that a node has (an
// optional input it lacks is not read); one output per input of the forward
// node, "d" + that input's name, shaped like it; no gradient of its own; the
// forward's recompute class and randomness. The op's file adds its kernel
// and whatever else differs (in-place pairs, workspace, FLOPs, layouts).
OpDef& AddBackward(OpRegistry* r, OpDef& fwd, std::vector<BackwardRead> reads, const std::string& doc);

// A tensor's elements as T, for kernels written once over the activation
// type: float (a float32 tensor) or uint16_t (bfloat16 bits, frugal/bf16.h).
// Checked, like Tensor::f(): a tensor of another dtype fails loudly.
template <typename T>
T* Elems(const Tensor& t) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t>, "float32 or bfloat16 bits");
  if constexpr (std::is_same_v<T, float>) {
    return t.f();
  } else {
    return t.bf16();
  }
}

// relu's backward kernel (src/ops/relu.cc): inputs dy, y; output dx = y > 0
// ? dy : 0, float32 or bfloat16. activation's relu runs it too.
void ReluBackward(const KernelCtx& c);

// Output k's data, or nullptr when nobody reads it: an output with
// OpReq::kNull has no memory, and kernels must not touch it.
template <typename T = float>
T* Out(const KernelCtx& c, int k) {
  return c.req[k] == OpReq::kNull ? nullptr : Elems<T>(c.out[k]);
}
// The node's workspace, or nullptr when its plan gave it none.
inline void* Workspace(const KernelCtx& c) { return c.workspace.defined() ? c.workspace.raw() : nullptr; }

// y = x honouring req, for the ops that only move data (reshape, identity):
// for kWrite a copy of the bytes, so any dtype (nothing when y is x);
// for kAdd, float32 or bfloat16 (added in float, rounded once; vec.h's
// add_n of one input). x and y have the same dtype and number of elements.
void CopyInto(const Tensor& x, const Tensor& y, OpReq req);

// Elementwise loops at or below this size run on one thread.
constexpr int64_t kParallelGrain = 32768;
// ForEachRange (vec.h's kernels) splits only past this many elements: a
// second thread woken under OMP_WAIT_POLICY=PASSIVE cost about 65 us where
// relu on 65,536 floats takes 6 us on one (`frugal time`, MLP at batch
// 128: 73 us a call on two threads); at 2^18 the MLP's step fell from 3.14
// to 2.87 ms and ResNet-56's from 145 to 138 ms (docs/benchmarks.md).
constexpr int64_t kRangeGrain = 1 << 18;

// y[i] = f(i) for i in [0, n), honouring req; parallel over elements with
// at most the kernel threads the engine gave this thread.
template <typename F>
void ForEach(int64_t n, float* y, OpReq req, F f) {
  if (req == OpReq::kNull) return;
  const int threads = cpu::KernelThreads();
  (void)threads;  // unused where OpenMP is off (the ThreadSanitizer build)
  if (req == OpReq::kAdd) {
#pragma omp parallel for num_threads(threads) if (n > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] += f(i);
  } else {
#pragma omp parallel for num_threads(threads) if (n > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = f(i);
  }
}

// f(begin, end) over [0, n) cut into contiguous ranges (at most one per
// kernel thread and per kRangeGrain elements, each a multiple of 16
// elements but the last), run in parallel: for vec.h's kernels, which take
// a range.
template <typename F>
void ForEachRange(int64_t n, F f) {
  const int64_t threads = cpu::KernelThreads();
  const int64_t ranges = std::min<int64_t>(threads, (n + kRangeGrain - 1) / kRangeGrain);
  if (ranges <= 1) return f(int64_t{0}, n);
#pragma omp parallel for num_threads(static_cast <int>(ranges)) schedule(static)
  for (int64_t r = 0; r < ranges; ++r) {
    const int64_t begin = r == 0 ? 0 : (n * r / ranges) & ~int64_t{15};
    const int64_t end = r == ranges - 1 ? n : (n * (r + 1) / ranges) & ~int64_t{15};
    f(begin, end);
  }
}

// body(t, nt, sync) on every kernel thread of one OpenMP region (on the
// calling thread alone unless `parallel`); sync() waits for all nt. One
// region and spinning barriers: a region or an OpenMP barrier per pass cost
// more than the passes under OMP_WAIT_POLICY=PASSIVE (cpu::SpinBarrier).
template <typename F>
void InOneRegion(bool parallel, F body) {
  cpu::SpinBarrier barrier;
  const int threads = parallel ? cpu::KernelThreads() : 1;
  (void)threads;  // unused where OpenMP is off (the ThreadSanitizer build)
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    body(t, nt, [&barrier, nt] { barrier.Wait(nt); });
  }
}

// sum_{r < n} f(r) in double, in a fixed number of chunks summed in order, so
// the bits do not depend on the number of threads.
template <typename F>
double SumOf(int64_t n, F f) {
  constexpr int kChunks = 64;
  if (n <= kParallelGrain) {
    double s = 0;
    for (int64_t r = 0; r < n; ++r) s += f(r);
    return s;
  }
  double part[kChunks];
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kChunks; ++c) {
    double s = 0;
    for (int64_t r = n * c / kChunks; r < n * (c + 1) / kChunks; ++r) s += f(r);
    part[c] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

// Row-major strides of a shape (in elements).
std::vector<int64_t> Strides(const Shape& s);

// Maps a row-major linear index over `dims` to the offset
// sum_d coord_d * stride_d. Dims of size 1 are dropped and neighbours that
// step evenly are merged, so a typical map decodes one or two dims.
class StridedIndex {
 public:
  StridedIndex() = default;
  StridedIndex(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
  int64_t size() const { return size_; }
  // The merged dims and their strides (for the CUDA kernels' copy of the map).
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  // offset(i) == i for every i.
  bool identity() const { return dims_.empty() || (dims_.size() == 1 && strides_[0] == 1); }
  int64_t operator()(int64_t i) const {
    int64_t off = 0;
    for (int d = static_cast<int>(dims_.size()) - 1; d > 0; --d) {
      off += (i % dims_[d]) * strides_[d];
      i /= dims_[d];
    }
    return dims_.empty() ? 0 : off + i * strides_[0];
  }

 private:
  std::vector<int64_t> dims_, strides_;
  int64_t size_ = 1;
};

// numpy broadcasting: dims aligned from the right, each pair equal or one of
// them 1. Returns false if a and b do not broadcast.
bool BroadcastShape(const Shape& a, const Shape& b, Shape* y);
// For y's linear index, the offset of the element of x (which broadcasts to
// y) that lands there.
StridedIndex BroadcastIndex(const Shape& x, const Shape& y);

// A reduction of a tensor of shape x over some of its dims:
// kept(j) + folded(r) visits every element of x once, j running over the
// result in row-major order and r over one group of folded elements.
struct Reduction {
  StridedIndex kept, folded;
};
Reduction MakeReduction(const Shape& x, const std::vector<bool>& fold);
// The reduction that sums y (the broadcast result) back to x's shape: the
// gradient of a broadcast.
Reduction BroadcastReduction(const Shape& x, const Shape& y);

// dx[j] = sum of g(o) over the elements o of y (linear indices) that x's
// element j broadcasts to: the gradient of a broadcast, with g the
// gradient at each element of y. Elementwise when x has y's size.
template <typename G>
void SumToShape(const Shape& x, const Shape& y, float* dx, OpReq req, G g) {
  if (req == OpReq::kNull) return;
  if (x.Size() == y.Size()) return ForEach(y.Size(), dx, req, g);
  const Reduction red = BroadcastReduction(x, y);
  ForEach(red.kept.size(), dx, req, [&](int64_t j) {
    const int64_t base = red.kept(j);
    return static_cast<float>(SumOf(red.folded.size(), [&](int64_t r) { return g(base + red.folded(r)); }));
  });
}

// Normalises an axis given as in numpy (-1 = last) for a tensor of ndim
// dims (ndim + 1 when inserting); fails the shape context if out of range.
int NormalizeAxis(const ShapeCtx& c, int64_t axis, int ndim, const char* what = "axis");

}  // namespace frugal
