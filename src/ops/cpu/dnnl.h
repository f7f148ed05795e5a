// oneDNN on the CPU: one engine, one stream per thread, a cache of objects
// built once per key (op kind, shapes, attributes), and PlainCall, which runs
// one primitive on the plain row-major tensors that users and other ops see.
//
// Primitives are built with format_tag::any where oneDNN gains from its own
// (blocked) layouts; PlainCall then reorders inputs into the op's workspace,
// runs the primitive, and reorders outputs back. Every byte it needs, the
// primitive's scratchpad included (scratchpad_mode::user), comes from the
// workspace the memory planner placed in the arena; WorkspaceBytes() says how
// much that is, so OpDef::Workspace can report it before anything runs.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/op.h"

namespace frugal::cpu {

// The CPU engine, created on first use.
dnnl::engine& DnnlEngine();
// A stream on that engine, one per thread, created on first use there.
dnnl::stream& DnnlStream();

// oneDNN's name for an element type (f32, bf16, s32, u8).
dnnl::memory::data_type DnnlType(DType t);
// Row-major (plain) layout of dims: a, ab, abc, abcd or abcde.
dnnl::memory::desc PlainDesc(const std::vector<int64_t>& dims, DType t = DType::kFloat32);
dnnl::memory::desc PlainDesc(const Shape& s, DType t = DType::kFloat32);
// A frugal tensor's desc in its layout: plain, or nhwc for Layout::kNhwc (4-D).
dnnl::memory::desc LayoutDesc(const std::vector<int64_t>& dims, DType t, Layout l);
// The same dims with format_tag::any: the primitive chooses.
dnnl::memory::desc AnyDesc(const std::vector<int64_t>& dims, DType t = DType::kFloat32);
// Whether oneDNN builds bfloat16 convolutions on this CPU (it needs
// AVX-512: native with AVX512-BF16, emulated without; none on AVX2-only
// CPUs). Probed once.
bool HasBf16();
// Throws Error saying so, with the fix, where it does not: the ops call it
// before building a bfloat16 primitive.
void RequireBf16();
// Attributes every frugal primitive uses: scratchpad_mode::user, and with
// sum a post-op sum (dst = op(...) + dst) for OpReq::kAdd.
dnnl::primitive_attr Attr(bool sum = false);

// Returns the object cached under key, building it with make on first use.
// Thread-safe; objects live as long as the process.
std::shared_ptr<const void> CachedErased(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& make);
template <typename T, typename Make>
const T& Cached(const std::string& key, Make make) {
  auto p = CachedErased(key, [&]() -> std::shared_ptr<const void> { return std::make_shared<const T>(make()); });
  return *static_cast<const T*>(p.get());
}
// Number of objects in the cache (for tests: built once, not per run).
int64_t CacheSize();

// One argument of a PlainCall: the oneDNN argument id and the plain layout
// the caller's tensor has.
struct PlainArg {
  int arg;
  dnnl::memory::desc user;
  bool output = false;
  // Outputs in the primitive's own layout that are only ever written
  // (oneDNN workspaces such as max pooling's argmax): no buffer, no kAdd.
  bool write_only = false;
};

// One primitive run on plain tensors. Inputs whose layout differs from the
// primitive's are reordered into the workspace; outputs are computed in the
// workspace and reordered out (with a sum post-op on the reorder for kAdd),
// except an output in the user's layout with req kWrite, which the primitive
// writes directly, and, when a sum variant of the primitive is given, with
// req kAdd too (post-op sum, no buffer). Callers skip the call when every
// output is kNull.
class PlainCall {
 public:
  PlainCall(const dnnl::primitive_desc_base& pd, dnnl::primitive prim, std::vector<PlainArg> args,
            dnnl::primitive prim_sum = {});
  // Scratchpad plus conversion buffers, each 64-byte aligned.
  int64_t WorkspaceBytes() const { return ws_bytes_; }
  // ptrs and reqs are parallel to the args given at construction (reqs of
  // inputs are ignored); ws holds WorkspaceBytes().
  void Run(const std::vector<void*>& ptrs, const std::vector<OpReq>& reqs, void* ws) const;
  // The forward of a node with inputs x, W[, b] and output y (convolution,
  // deconvolution, fully_connected), in the node's workspace.
  void RunForward(const KernelCtx& c, bool bias) const;
  // The layout the primitive uses for an argument (e.g. a workspace output).
  dnnl::memory::desc Wanted(int i) const { return slots_[i].wanted; }

 private:
  struct Slot {
    PlainArg a;
    dnnl::memory::desc wanted;
    bool same = false;          // wanted == user
    int64_t buf_offset = -1;    // in the workspace; -1: none
    dnnl::reorder to_prim;      // inputs: user -> wanted
    dnnl::reorder to_user;      // outputs: wanted -> user
    dnnl::reorder add_to_user;  // outputs: user += wanted
  };
  dnnl::primitive prim_, prim_sum_;
  bool has_sum_ = false, has_scratch_ = false;
  dnnl::memory::desc scratch_;
  int64_t ws_bytes_ = 0;
  std::vector<Slot> slots_;
};

// The backward of a node with inputs x, W[, b] (convolution, deconvolution):
// the backward node reads dy, x, W and writes dx (bwd_data from dy, W), dW
// and db (bwd_weights from dy, x: one primitive; an unrequested one lands in
// the workspace). dy may be a copy of input 0 in the primitives' layout.
void RunWeightedBackward(const PlainCall& bwd_data, const PlainCall& bwd_weights, const KernelCtx& c, void* dy,
                         bool bias, void* ws);

// A reorder between two layouts of one tensor (for an input that several
// primitives read in the same layout: converted once, e.g. a convolution's
// output gradient for its data and weight gradients).
class Reorder {
 public:
  Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
  void Run(const void* from, void* to) const;

 private:
  dnnl::memory::desc from_, to_;
  dnnl::reorder prim_;
};

// y = f(x) elementwise by a oneDNN eltwise primitive (alg, alpha, beta),
// treating x and y as flat arrays of n floats; x and y may alias. kWrite
// writes y directly; kAdd computes kEltwiseChunk floats at a time into ws and
// adds them to y, so ws holds EltwiseWorkspaceBytes().
constexpr int64_t kEltwiseChunk = 16384;
int64_t EltwiseWorkspaceBytes();
void Eltwise(dnnl::algorithm alg, float alpha, float beta, const float* x, float* y, int64_t n, OpReq req, void* ws);

// Rounds up to the arena's 64-byte alignment.
inline int64_t AlignUp(int64_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace frugal::cpu
