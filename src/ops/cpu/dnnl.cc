#include "ops/cpu/dnnl.h"

#include <glog/logging.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "ops/cpu/kernel_names.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace frugal::cpu {

using dnnl::memory;

dnnl::engine& DnnlEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& DnnlStream() {
  thread_local dnnl::stream stream(DnnlEngine());
  return stream;
}

namespace {
memory::format_tag PlainTag(size_t ndim) {
  using tag = memory::format_tag;
  static const tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  CHECK(ndim >= 1 && ndim <= 6) << "oneDNN tensors have 1 to 6 dims, got " << ndim;
  return tags[ndim - 1];
}
}  // namespace

memory::data_type DnnlType(DType t) {
  switch (t) {
    case DType::kFloat32: return memory::data_type::f32;
    case DType::kBFloat16: return memory::data_type::bf16;
    case DType::kInt32: return memory::data_type::s32;
    case DType::kUInt8: return memory::data_type::u8;
  }
  return memory::data_type::undef;
}

memory::desc PlainDesc(const std::vector<int64_t>& dims, DType t) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), DnnlType(t), PlainTag(dims.size()));
}

memory::desc PlainDesc(const Shape& s, DType t) { return PlainDesc(s.dims(), t); }

memory::desc LayoutDesc(const std::vector<int64_t>& dims, DType t, Layout l) {
  if (l == Layout::kPlain) return PlainDesc(dims, t);
  CHECK_EQ(dims.size(), 4u) << "a channels-last desc needs 4 dims";
  return memory::desc(memory::dims(dims.begin(), dims.end()), DnnlType(t), memory::format_tag::nhwc);
}

memory::desc AnyDesc(const std::vector<int64_t>& dims, DType t) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), DnnlType(t), memory::format_tag::any);
}

bool HasBf16() {
  static const bool has = [] {
    try {
      const memory::desc x({1, 16, 4, 4}, memory::data_type::bf16, memory::format_tag::any);
      const memory::desc w({16, 16, 1, 1}, memory::data_type::bf16, memory::format_tag::any);
      dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, x, w,
                                          x, {1, 1}, {0, 0}, {0, 0}),
          DnnlEngine());
      return true;
    } catch (const dnnl::error&) { return false; }
  }();
  return has;
}

void RequireBf16() {
  FRUGAL_REQUIRE(HasBf16(),
                 "bfloat16 activations need oneDNN's bfloat16 kernels, which this CPU lacks (they need "
                 "AVX-512); train with --dtype float32");
}

dnnl::primitive_attr Attr(bool sum) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (sum) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

namespace {
// A primitive's implementation, named for `frugal time` (kernel_names.h);
// nothing to look up when no one asks.
void NoteImplementation(const dnnl::primitive& p) {
  if (!NamingKernels()) return;
  const char* name = nullptr;
  if (dnnl_primitive_desc_query(p.get_primitive_desc(), dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
    NoteKernel(name);
}

struct Cache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const void>> objects;
};
Cache& TheCache() {
  static Cache* cache = new Cache;
  return *cache;
}
}  // namespace

std::shared_ptr<const void> CachedErased(const std::string& key,
                                         const std::function<std::shared_ptr<const void>()>& make) {
  Cache& c = TheCache();
  {
    std::lock_guard<std::mutex> cache_lock(c.mu);
    auto it = c.objects.find(key);
    if (it != c.objects.end()) return it->second;
  }
  // Build outside the lock (JIT compilation takes milliseconds); the first
  // object stored under the key wins.
  std::shared_ptr<const void> made = make();
  std::lock_guard<std::mutex> cache_lock(c.mu);
  return c.objects.emplace(key, std::move(made)).first->second;
}

int64_t CacheSize() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> cache_lock(c.mu);
  return static_cast<int64_t>(c.objects.size());
}

// ----------------------------------------------------------------- PlainCall

namespace {
// Small reorders (weights) run on one thread: waking the OpenMP team costs
// about 60 us under OMP_WAIT_POLICY=PASSIVE, where a 64x64x3x3 weight takes
// 8 us on one thread. oneDNN's jit:uni reorder fixes its thread count when
// it is created, so creation is held to one thread too (measured with
// ONEDNN_VERBOSE on ResNet-1001: 16x16x3x3 weights took 85 us a call).
constexpr size_t kSmallReorderBytes = 1 << 20;

class OneThreadIfSmall {
 public:
  explicit OneThreadIfSmall(size_t bytes) {
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    if (bytes < kSmallReorderBytes && threads > 1) {
      restore_ = threads;
      omp_set_num_threads(1);
    }
#else
    (void)bytes;
#endif
  }
  ~OneThreadIfSmall() {
#ifdef _OPENMP
    if (restore_ > 0) omp_set_num_threads(restore_);
#endif
  }
  OneThreadIfSmall(const OneThreadIfSmall&) = delete;
  OneThreadIfSmall& operator=(const OneThreadIfSmall&) = delete;

 private:
  int restore_ = 0;
};

dnnl::reorder MakeReorder(const memory::desc& from, const memory::desc& to, bool sum, int64_t* scratch) {
  OneThreadIfSmall one(from.get_size());
  dnnl::reorder::primitive_desc pd(DnnlEngine(), from, DnnlEngine(), to, Attr(sum));
  *scratch = std::max<int64_t>(*scratch, pd.scratchpad_desc().get_size());
  return dnnl::reorder(pd);
}

void ExecuteReorder(const dnnl::reorder& r, std::unordered_map<int, memory>& args, size_t bytes) {
  OneThreadIfSmall one(bytes);
  NoteImplementation(r);
  r.execute(DnnlStream(), args);
}
}  // namespace

Reorder::Reorder(const memory::desc& from, const memory::desc& to) : from_(from), to_(to) {
  OneThreadIfSmall one(from.get_size());
  dnnl::reorder::primitive_desc pd(DnnlEngine(), from, DnnlEngine(), to);
  CHECK_EQ(pd.scratchpad_desc().get_size(), 0u) << "a reorder that needs a scratchpad";
  prim_ = dnnl::reorder(pd);
}

void Reorder::Run(const void* from, void* to) const {
  const dnnl::engine& eng = DnnlEngine();
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, memory(from_, eng, const_cast<void*>(from))},
                                       {DNNL_ARG_TO, memory(to_, eng, to)}};
  ExecuteReorder(prim_, args, from_.get_size());
  DnnlStream().wait();
}

PlainCall::PlainCall(const dnnl::primitive_desc_base& pd, dnnl::primitive prim, std::vector<PlainArg> args,
                     dnnl::primitive prim_sum)
    : prim_(std::move(prim)), prim_sum_(std::move(prim_sum)) {
  has_sum_ = static_cast<bool>(prim_sum_);
  int64_t scratch = pd.scratchpad_desc().get_size();
  for (PlainArg& a : args) {
    Slot s;
    s.wanted = pd.query_md(dnnl::query::exec_arg_md, a.arg);
    CHECK(s.wanted.get_size() > 0) << "primitive " << pd.impl_info_str() << " has no argument " << a.arg;
    s.same = s.wanted == a.user;
    CHECK(s.same || !a.write_only) << "a write-only argument must be in the primitive's layout";
    if (!a.output) {
      if (!s.same) s.to_prim = MakeReorder(a.user, s.wanted, false, &scratch);
    } else {
      if (!s.same) s.to_user = MakeReorder(s.wanted, a.user, false, &scratch);
      if (!(s.same && (has_sum_ || a.write_only))) s.add_to_user = MakeReorder(s.wanted, a.user, true, &scratch);
    }
    s.a = std::move(a);
    slots_.push_back(std::move(s));
  }
  has_scratch_ = scratch > 0;
  if (has_scratch_) scratch_ = memory::desc({scratch}, memory::data_type::u8, memory::format_tag::a);
  ws_bytes_ = AlignUp(scratch);
  for (Slot& s : slots_) {
    bool needs_buf = s.a.output ? !(s.same && (has_sum_ || s.a.write_only)) : !s.same;
    if (!needs_buf) continue;
    s.buf_offset = ws_bytes_;
    ws_bytes_ += AlignUp(s.wanted.get_size());
  }
}

void PlainCall::RunForward(const KernelCtx& c, bool bias) const {
  std::vector<void*> ptrs{c.in[0].raw(), c.in[1].raw()};
  if (bias) ptrs.push_back(c.in[2].raw());
  ptrs.push_back(c.out[0].raw());
  std::vector<OpReq> reqs(ptrs.size(), OpReq::kWrite);
  reqs.back() = c.req[0];
  Run(ptrs, reqs, c.workspace.defined() ? c.workspace.raw() : nullptr);
}

void RunWeightedBackward(const PlainCall& bwd_data, const PlainCall& bwd_weights, const KernelCtx& c, void* dy,
                         bool bias, void* ws) {
  const OpReq kIn = OpReq::kWrite;
  if (c.req[0] != OpReq::kNull) bwd_data.Run({dy, c.in[2].raw(), c.out[0].raw()}, {kIn, kIn, c.req[0]}, ws);
  const bool want_db = bias && c.req[2] != OpReq::kNull;
  if (c.req[1] == OpReq::kNull && !want_db) return;
  auto out = [&c](int k) { return c.req[k] == OpReq::kNull ? nullptr : c.out[k].raw(); };
  std::vector<void*> ptrs{dy, c.in[1].raw(), out(1)};
  std::vector<OpReq> reqs{kIn, kIn, c.req[1]};
  if (bias) {
    ptrs.push_back(out(2));
    reqs.push_back(c.req[2]);
  }
  bwd_weights.Run(ptrs, reqs, ws);
}

void PlainCall::Run(const std::vector<void*>& ptrs, const std::vector<OpReq>& reqs, void* ws) const {
  CHECK_EQ(ptrs.size(), slots_.size());
  CHECK(ws_bytes_ == 0 || ws != nullptr) << "PlainCall needs a workspace of " << ws_bytes_ << " bytes";
  dnnl::stream& st = DnnlStream();
  const dnnl::engine& eng = DnnlEngine();
  char* base = static_cast<char*>(ws);
  std::unordered_map<int, memory> args;
  if (has_scratch_) args[DNNL_ARG_SCRATCHPAD] = memory(scratch_, eng, base);
  auto run_reorder = [&](const dnnl::reorder& r, const memory& from, const memory& to) {
    std::unordered_map<int, memory> ra{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if (has_scratch_) ra[DNNL_ARG_SCRATCHPAD] = args[DNNL_ARG_SCRATCHPAD];
    ExecuteReorder(r, ra, from.get_desc().get_size());
  };
  bool use_sum = false;
  std::vector<memory> user(slots_.size()), prim(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    const OpReq req = s.a.output ? reqs[i] : OpReq::kWrite;
    CHECK(!(s.a.write_only && req == OpReq::kAdd)) << "argument " << s.a.arg << " is write-only";
    const bool direct = s.same && (req == OpReq::kWrite || (req == OpReq::kAdd && has_sum_));
    if (ptrs[i] != nullptr) user[i] = memory(s.a.user, eng, ptrs[i]);
    if (direct) {
      CHECK(ptrs[i] != nullptr) << "argument " << s.a.arg << " has no memory";
      prim[i] = user[i];
      use_sum = use_sum || (s.a.output && req == OpReq::kAdd);
    } else {
      CHECK_GE(s.buf_offset, 0) << "argument " << s.a.arg << " has no buffer";
      prim[i] = memory(s.wanted, eng, base + s.buf_offset);
      if (!s.a.output) run_reorder(s.to_prim, user[i], prim[i]);
    }
    args[s.a.arg] = prim[i];
  }
  NoteImplementation(use_sum ? prim_sum_ : prim_);
  (use_sum ? prim_sum_ : prim_).execute(st, args);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.a.output || prim[i].get_data_handle() == ptrs[i] || reqs[i] == OpReq::kNull) continue;
    run_reorder(reqs[i] == OpReq::kAdd ? s.add_to_user : s.to_user, prim[i], user[i]);
  }
  st.wait();
}

// ------------------------------------------------------------------- Eltwise

namespace {
struct EltwisePrim {
  dnnl::eltwise_forward prim;
  memory::desc md;
  int64_t scratch = 0;
};

const EltwisePrim& EltwiseFor(dnnl::algorithm alg, float alpha, float beta, int64_t n) {
  return Cached<EltwisePrim>(Fmt("eltwise", static_cast<int>(alg), "a", alpha, "b", beta, "n", n), [&] {
    memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, md, alpha, beta), Attr(), DnnlEngine());
    return EltwisePrim{dnnl::eltwise_forward(pd), md, static_cast<int64_t>(pd.scratchpad_desc().get_size())};
  });
}

void RunEltwise(const EltwisePrim& e, const float* x, float* y) {
  CHECK_EQ(e.scratch, 0) << "eltwise primitives are expected to need no scratchpad";
  const dnnl::engine& eng = DnnlEngine();
  NoteImplementation(e.prim);
  e.prim.execute(DnnlStream(),
                 {{DNNL_ARG_SRC, memory(e.md, eng, const_cast<float*>(x))}, {DNNL_ARG_DST, memory(e.md, eng, y)}});
}
}  // namespace

int64_t EltwiseWorkspaceBytes() { return kEltwiseChunk * static_cast<int64_t>(sizeof(float)); }

void Eltwise(dnnl::algorithm alg, float alpha, float beta, const float* x, float* y, int64_t n, OpReq req, void* ws) {
  if (req == OpReq::kNull || n == 0) return;
  if (req == OpReq::kWrite) {
    RunEltwise(EltwiseFor(alg, alpha, beta, n), x, y);
    DnnlStream().wait();
    return;
  }
  CHECK(ws != nullptr) << "eltwise with req add needs " << EltwiseWorkspaceBytes() << " bytes of workspace";
  float* tmp = static_cast<float*>(ws);
  for (int64_t off = 0; off < n; off += kEltwiseChunk) {
    const int64_t m = std::min(kEltwiseChunk, n - off);
    RunEltwise(EltwiseFor(alg, alpha, beta, m), x + off, tmp);
    DnnlStream().wait();
    for (int64_t i = 0; i < m; ++i) y[off + i] += tmp[i];
  }
}

}  // namespace frugal::cpu
