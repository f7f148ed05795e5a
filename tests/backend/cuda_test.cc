// The CUDA backend. Tests that need a GPU skip themselves with the reason
// ("no CUDA device (...)" or "frugal was built without CUDA"), and ctest
// lists them as skipped (tests/CMakeLists.txt). The others run everywhere:
// device accounting, the executor's refusal of ops without a CUDA kernel,
// and the CLI's errors for --gpus.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ops/cpu/philox.h"
#include "backend/device.h"
#include "frugal/config.h"
#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "frugal/train.h"
#include "ops/op_harness.h"
#include "test_util.h"

namespace frugal {
#ifdef FRUGAL_WITH_CUDA
namespace test {  // tests/backend/philox_nvcc.cu
cpu::PhiloxCounter PhiloxHostByNvcc(uint64_t seed, uint64_t node_key, int64_t step, uint64_t block);
bool PhiloxDeviceByNvcc(uint64_t seed, uint64_t node_key, int64_t step, uint64_t block, cpu::PhiloxCounter* words);
}  // namespace test
#endif

namespace {

#define FRUGAL_REQUIRE_GPU()                                                      \
  do {                                                                            \
    if (backend::CudaDeviceCount() == 0) GTEST_SKIP() << backend::NoCudaReason(); \
  } while (0)

const Device kGpu0{DeviceType::kCUDA, 0};

// A graph x -> op "node" -> y, shapes inferred.
Graph OneOpGraph(const std::string& op, const std::string& node, const AttrMap& attrs, const Shape& x) {
  Graph g;
  const int v = g.AddVariable("x", VarKind::kInput);
  const int n = g.AddOp(op, node, attrs, {{v, 0}});
  g.outputs.push_back({n, 0});
  InferShapes(&g, {{"x", x}});
  return g;
}

TEST(CudaBackend, SaysWhyThereIsNoDevice) {
  if (backend::CudaDeviceCount() > 0) {
    const int n = backend::CudaDeviceCount();
    test::ExpectError([&] { backend::RequireCudaDevice(n, "--gpus"); }, {"--gpus", "no cuda(", "numbered 0 to"});
    return;
  }
  const std::string why = backend::NoCudaReason();
  EXPECT_TRUE(why.find("no CUDA device") == 0 || why == "frugal was built without CUDA") << why;
  test::ExpectError([] { backend::RequireCudaDevice(0, "--gpus 0"); },
                    {"--gpus 0", backend::BuiltWithCuda() ? "no CUDA device" : "without CUDA"});
}

// Device memory is counted per device: a GPU's bytes never show on the CPU
// or another GPU, and peaks follow.
TEST(CudaBackend, AccountingKeepsDevicesApart) {
  MemoryAccounting& acc = MemoryAccounting::Get();
  const Device gpu3{DeviceType::kCUDA, 3}, cpu{};
  const int64_t cpu_before = acc.Current(cpu), gpu_before = acc.Current(gpu3);
  const int64_t arena_before = acc.Current(gpu3, MemKind::kArena);
  acc.ResetPeaks();
  acc.Add(gpu3, MemKind::kArena, 1000);
  acc.Add(gpu3, MemKind::kParam, 24);
  EXPECT_EQ(acc.Current(gpu3) - gpu_before, 1024);
  EXPECT_EQ(acc.Current(gpu3, MemKind::kArena) - arena_before, 1000);
  EXPECT_EQ(acc.Current(cpu), cpu_before);
  EXPECT_EQ(acc.Current(Device{DeviceType::kCUDA, 2}), 0);
  acc.Sub(gpu3, MemKind::kArena, 1000);
  acc.Sub(gpu3, MemKind::kParam, 24);
  EXPECT_EQ(acc.Current(gpu3), gpu_before);
  EXPECT_GE(acc.Peak(gpu3), gpu_before + 1024);
}

// A GPU run of an op without a CUDA kernel fails at bind time, naming the
// node, before any device memory is touched (so this runs without a GPU).
TEST(CudaExecutor, RefusesAnOpWithoutCudaKernel) {
  // Every registered op has a CUDA kernel in a CUDA build: a CPU-only op of
  // a registry of this test's own.
  OpRegistry local;
  const OpDef& cpu_only = local.Add("cpu_only")
                              .Inputs({{"x"}})
                              .Outputs({"y"})
                              .InferShape([](ShapeCtx& c) { c.out[0] = c.in[0]; })
                              .NoGradient()
                              .CpuKernel([](const KernelCtx&) {});
  Graph g;
  const int v = g.AddVariable("x", VarKind::kInput);
  Node n;
  n.name = "tr1";
  n.op = &cpu_only;
  n.inputs = {{v, 0}};
  g.outputs.push_back({g.AddNode(n), 0});
  InferShapes(&g, {{"x", Shape{2, 3}}});
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kNone);
  auto engine = MakeEngine("naive");
  Bindings b;
  b.device = kGpu0;
  b.vars["x"] = Tensor::Empty(Shape{2, 3});
  test::ExpectError([&] { Executor e(g, plan, b, engine.get()); },
                    {"tr1", "cpu_only", "has no CUDA kernel", "cuda(0)"});
}

TEST(CudaExecutor, NoDeviceIsAClearError) {
  if (backend::CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  const Graph g = OneOpGraph("relu", "r1", {}, Shape{2, 3});
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kNone);
  auto engine = MakeEngine("naive");
  Bindings b;
  b.device = kGpu0;
  b.vars["x"] = Tensor::Empty(Shape{2, 3});
  if (backend::BuiltWithCuda()) {
    test::ExpectError([&] { Executor e(g, plan, b, engine.get()); }, {"cuda(0)", "no CUDA device"});
  } else {
    test::ExpectError([&] { Executor e(g, plan, b, engine.get()); }, {"r1", "has no CUDA kernel"});
  }
}

// ---------------------------------------------------------------- Philox

#ifdef FRUGAL_WITH_CUDA
// The header's host code compiled by nvcc (as __host__ __device__) gives the
// words g++ gives; the device code too, where there is a GPU.
TEST(CudaPhilox, NvccAndGccDrawTheSameWords) {
  for (uint64_t block : {0ull, 1ull, 12345ull, 1ull << 33}) {
    const cpu::PhiloxCounter gcc = cpu::CounterStream(7, StableHash("drop1"), 3).Block(block);
    EXPECT_EQ(test::PhiloxHostByNvcc(7, StableHash("drop1"), 3, block), gcc) << block;
  }
}

TEST(CudaPhilox, DeviceDrawsTheHostWords) {
  FRUGAL_REQUIRE_GPU();
  cpu::PhiloxCounter words{};
  ASSERT_TRUE(test::PhiloxDeviceByNvcc(7, StableHash("drop1"), 3, 12345, &words));
  EXPECT_EQ(words, cpu::CounterStream(7, StableHash("drop1"), 3).Block(12345));
}
#endif

// ------------------------------------------------------------ CPU agreement

test::OpCase Case(const std::string& op, AttrMap attrs, std::vector<Shape> in, std::vector<bool> diff) {
  test::OpCase c;
  c.op = op;
  c.attrs = std::move(attrs);
  c.in_shapes = std::move(in);
  c.differentiable = std::move(diff);
  return c;
}

// Distinct values (no ties for max pooling, no relu kinks at 0).
void Distinct(int, std::vector<float>* v) {
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f + 0.001f;
}

// One case (or more) per forward op with a CUDA kernel; the tolerance is
// relative to max(1, |cpu|): 1e-4 for elementwise ops, 1e-3 where sums are
// ordered differently (cuBLAS, cuDNN, block reductions).
struct GpuCase {
  test::OpCase c;
  double tol;
};

std::vector<GpuCase> GpuCases() {
  std::vector<GpuCase> cases;
  auto add = [&](test::OpCase c, double tol) { cases.push_back({std::move(c), tol}); };
  for (const char* act : {"relu", "sigmoid", "tanh", "softrelu"})
    add(Case("activation", {{"act_type", act}}, {Shape{4, 33}}, {true}), 1e-4);
  add(Case("add_n", {{"num_args", "3"}}, {Shape{5, 7}, Shape{5, 7}, Shape{5, 7}}, {true, true, true}), 1e-5);
  for (const char* fix : {"true", "false"}) {
    test::OpCase bn =
        Case("batch_norm", {{"fix_gamma", fix}}, {Shape{4, 3, 5, 5}, Shape{3}, Shape{3}, Shape{3}, Shape{3}},
             {true, true, true, false, false});
    bn.fill = [](int k, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = k == 4 ? 0.5f + 0.1f * i : std::sin(0.37f * i + k);
    };
    add(bn, 1e-3);
  }
  add(Case("concat", {{"num_args", "2"}, {"dim", "1"}}, {Shape{2, 3, 4}, Shape{2, 5, 4}}, {true, true}), 1e-6);
  add(Case("convolution", {{"kernel", "(3,3)"}, {"num_filter", "4"}, {"pad", "(1,1)"}, {"stride", "(2,2)"}},
           {Shape{2, 3, 9, 9}}, {true, true, true}),
      1e-3);
  add(Case("convolution", {{"kernel", "(1,1)"}, {"num_filter", "6"}, {"num_group", "2"}, {"no_bias", "true"}},
           {Shape{2, 4, 5, 5}}, {true, true}),
      1e-3);
  add(Case("dropout", {{"p", "0.3"}}, {Shape{4, 50}}, {true}), 1e-6);  // the same Philox mask
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "power"}) {
    // One shape, then numpy broadcasting on both sides (gradients summed
    // over the broadcast dims); power's base positive.
    for (const auto& [sa, sb] : {std::pair<Shape, Shape>{Shape{3, 8}, Shape{3, 8}},
                                 {Shape{2, 3, 8}, Shape{3, 1}},
                                 {Shape{4, 1, 5}, Shape{3, 1}}}) {
      test::OpCase b = Case(op, {}, {sa, sb}, {true, true});
      b.fill = [op](int k, std::vector<float>* v) {
        for (size_t i = 0; i < v->size(); ++i) (*v)[i] = (k ? 1.5f : -0.5f) + std::sin(0.7f * i);
        if (k == 0 && std::string(op) == "power")
          for (float& x : *v) x += 2;
      };
      add(b, 1e-5);
    }
  }
  for (const char* op : {"add_scalar", "sub_scalar", "rsub_scalar", "mul_scalar", "div_scalar", "rdiv_scalar"}) {
    test::OpCase sc = Case(op, {{"scalar", "1.5"}}, {Shape{4, 9}}, {true});
    sc.fill = [](int, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = 0.5f + 0.01f * i;
    };
    add(sc, 1e-5);
  }
  for (const char* op : {"negative", "exp", "log", "sqrt", "square", "abs"}) {
    test::OpCase u = Case(op, {}, {Shape{5, 6}}, {true});
    u.fill = [](int, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = 0.3f + 0.05f * i;
    };
    add(u, 1e-5);
  }
  for (const char* op : {"sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "arcsinh", "arctanh", "floor",
                         "ceil", "round", "sign"}) {  // inputs in (-1, 1)
    test::OpCase u = Case(op, {}, {Shape{5, 6}}, {true});
    u.fill = [](int, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = 0.03f * i - 0.43f;
    };
    add(u, 1e-5);
  }
  test::OpCase acosh = Case("arccosh", {}, {Shape{5, 6}}, {true});
  acosh.fill = [](int, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = 1.1f + 0.1f * i;
  };
  add(acosh, 1e-5);
  for (const auto& [axis, norm] : {std::pair<const char*, Shape>{"-1", Shape{5}}, {"1", Shape{4, 5}}}) {
    test::OpCase ln = Case("layer_norm", {{"axis", axis}}, {Shape{3, 4, 5}, norm, norm}, {true, true, true});
    ln.fill = Distinct;
    add(ln, 1e-4);
  }
  for (const char* form : {"", "none", "tanh"}) {  // erf, then gelu in both forms
    test::OpCase u =
        Case(*form ? "gelu" : "erf", *form ? AttrMap{{"approximate", form}} : AttrMap{}, {Shape{5, 6}}, {true});
    u.fill = [](int, std::vector<float>* v) {
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = -1.5f + 0.1f * i;
    };
    add(u, 1e-5);
  }
  test::OpCase clip = Case("clip", {{"a_min", "-0.5"}, {"a_max", "0.5"}}, {Shape{5, 6}}, {true});
  clip.fill = Distinct;
  add(clip, 0);
  for (const char* act : {"leaky", "elu"}) {
    test::OpCase lr = Case("leaky_relu", {{"act_type", act}, {"slope", "0.3"}}, {Shape{4, 10}}, {true});
    lr.fill = Distinct;
    add(lr, 1e-5);
  }
  for (const char* norm : {"null", "batch", "valid"})
    add(Case("make_loss", {{"normalization", norm}, {"grad_scale", "3"}}, {Shape{4, 5}}, {true}), 1e-6);
  add(Case("matmul", {}, {Shape{3, 4}, Shape{4, 5}}, {true, true}), 1e-4);
  add(Case("matmul", {{"transpose_a", "true"}, {"transpose_b", "true"}}, {Shape{4, 3}, Shape{5, 4}}, {true, true}),
      1e-4);
  add(Case("batch_dot", {{"transpose_b", "true"}}, {Shape{2, 3, 4}, Shape{2, 5, 4}}, {true, true}), 1e-4);
  add(Case("batch_dot", {{"transpose_a", "true"}}, {Shape{2, 4, 3}, Shape{2, 4, 5}}, {true, true}), 1e-4);
  add(Case("softmax", {}, {Shape{3, 37}}, {true}), 1e-5);
  add(Case("softmax", {{"axis", "1"}}, {Shape{2, 5, 3}}, {true}), 1e-5);
  add(Case("log_softmax", {}, {Shape{3, 37}}, {true}), 1e-5);
  add(Case("log_softmax", {{"axis", "0"}}, {Shape{4, 6}}, {true}), 1e-5);
  add(Case("deconvolution", {{"kernel", "(3,3)"}, {"num_filter", "4"}, {"stride", "(2,2)"}, {"pad", "(1,1)"}},
           {Shape{2, 3, 5, 5}}, {true, true, true}),
      1e-3);
  add(Case("deconvolution",
           {{"kernel", "(4,4)"},
            {"num_filter", "4"},
            {"num_group", "2"},
            {"stride", "(2,2)"},
            {"target_shape", "(10,10)"},
            {"no_bias", "true"}},
           {Shape{1, 2, 5, 5}}, {true, true}),
      1e-3);
  for (const char* op : {"sum", "mean", "max", "min"}) {
    test::OpCase red = Case(op, {{"axis", "(0,2)"}}, {Shape{3, 4, 5}}, {true});
    red.fill = Distinct;
    add(red, 1e-5);
    test::OpCase all = Case(op, {}, {Shape{6, 7}}, {true});
    all.fill = Distinct;
    add(all, 1e-5);
  }
  for (const char* op : {"linear_regression_output", "logistic_regression_output"})
    add(Case(op, {{"grad_scale", "2"}}, {Shape{4, 3}, Shape{4, 3}}, {true, false}), 1e-5);
  add(Case("slice", {{"begin", "(1,None,0)"}, {"end", "(None,1,3)"}, {"step", "(1,-1,2)"}}, {Shape{3, 4, 5}}, {true}),
      0);
  add(Case("transpose", {{"axes", "(1,2,0)"}}, {Shape{2, 3, 4}}, {true}), 0);
  add(Case("transpose", {}, {Shape{3, 5}}, {true}), 0);
  test::OpCase emb =
      Case("embedding", {{"input_dim", "5"}, {"output_dim", "4"}}, {Shape{2, 3}, Shape{5, 4}}, {false, true});
  emb.fill = [](int k, std::vector<float>* v) {
    if (k == 0)
      *v = {0, 2, 2, 4, 0, 1};
    else
      Distinct(k, v);
  };
  add(emb, 1e-5);
  add(Case("flatten", {}, {Shape{2, 3, 4}}, {true}), 0);
  add(Case("fully_connected", {{"num_hidden", "7"}}, {Shape{5, 2, 3}}, {true, true, true}), 1e-4);
  add(Case("fully_connected", {{"num_hidden", "3"}, {"no_bias", "true"}, {"flatten", "false"}}, {Shape{2, 4, 6}},
           {true, true}),
      1e-4);
  add(Case("identity", {}, {Shape{3, 5}}, {true}), 0);
  add(Case("lstm_cell", {}, {Shape{3, 4 * 37}, Shape{3, 4 * 37}, Shape{3, 37}}, {true, true, true}), 1e-5);
  for (const char* pool : {"max", "avg"}) {
    test::OpCase p = Case("pooling", {{"pool_type", pool}, {"kernel", "(3,3)"}, {"stride", "(2,2)"}, {"pad", "(1,1)"}},
                          {Shape{2, 3, 9, 9}}, {true});
    p.fill = Distinct;
    add(p, 1e-5);
  }
  test::OpCase gp = Case("pooling", {{"pool_type", "avg"}, {"global_pool", "true"}, {"kernel", "(1,1)"}},
                         {Shape{2, 4, 7, 7}}, {true});
  add(gp, 1e-5);
  test::OpCase relu = Case("relu", {}, {Shape{6, 7}}, {true});
  relu.fill = Distinct;
  add(relu, 0);
  add(Case("reshape", {{"shape", "(4,-1)"}}, {Shape{2, 3, 4}}, {true}), 0);
  add(Case("expand_dims", {{"axis", "1"}}, {Shape{2, 3}}, {true}), 0);
  add(Case("split", {{"num_outputs", "3"}, {"axis", "1"}}, {Shape{2, 6, 2}}, {true}), 0);
  add(Case("slice_channel", {{"num_outputs", "2"}}, {Shape{2, 4}}, {true}), 0);
  test::OpCase sce = Case("softmax_cross_entropy", {}, {Shape{5, 4}, Shape{5}}, {true, false});
  sce.fill = [](int k, std::vector<float>* v) {
    if (k == 1)
      *v = {2, 1, 0, 3, 3};
    else
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = std::sin(2.1f * i);
  };
  add(sce, 1e-5);
  test::OpCase sce_valid = sce;
  sce_valid.attrs = {{"ignore_label", "-1"}, {"normalization", "valid"}};
  sce_valid.fill = [](int k, std::vector<float>* v) {
    if (k == 1)
      *v = {2, -1, 0, -1, 3};
    else
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = std::sin(2.1f * i);
  };
  add(sce_valid, 1e-5);
  return cases;
}

// Every forward op with a CUDA kernel has an agreement case above (runs
// without a GPU: it only reads the registry).
TEST(CudaOps, EveryCudaKernelHasAnAgreementCase) {
  std::set<std::string> covered;
  for (const GpuCase& k : GpuCases()) covered.insert(k.c.op);
  int with_kernel = 0;
  for (const OpDef* op : OpRegistry::Get().All()) {
    if (!op->cuda_kernel()) continue;
    ++with_kernel;
    if (op->name()[0] == '_' || op->name() == "block_grad" || op->name() == "zeros_like") continue;  // run as gradients
    if (op->outputs().empty()) continue;  // updates: tests/backend/cuda_train_test.cc compares their mutated inputs
    EXPECT_TRUE(covered.count(op->name())) << op->name() << " has a CUDA kernel but no case in GpuCases()";
  }
  if (backend::BuiltWithCuda()) {
    EXPECT_GE(with_kernel, 30);
  } else {
    EXPECT_EQ(with_kernel, 0);
  }
}

TEST(CudaOps, MatchTheCpuKernels) {
  FRUGAL_REQUIRE_GPU();
  for (const GpuCase& k : GpuCases()) {
    SCOPED_TRACE(k.c.op);
    EXPECT_GT(test::CheckOpOnDevice(k.c, kGpu0, std::max(k.tol, 1e-6)), 0) << k.c.op;
  }
}

// ----------------------------------------------------- recompute on the GPU

// A small ResNet-like net with dropout: every strategy must give the GPU
// gradients of strategy none bit for bit (deterministic algorithms, one
// stream, the same Philox draws when a dropout is recomputed).
ConfigFile ResidualNet() {
  std::string text = "node { name: \"data\" op: \"variable\" }\nnode { name: \"label\" op: \"variable\" }\n";
  std::string prev = "data";
  for (int i = 0; i < 6; ++i) {
    const std::string s = std::to_string(i);
    text += "node { name: \"conv" + s + "\" op: \"convolution\" input: \"" + prev +
            "\" attr { key: \"kernel\" value: \"(3,3)\" } attr { key: \"pad\" value: \"(1,1)\" } "
            "attr { key: \"num_filter\" value: \"8\" } }\n";
    text += "node { name: \"bn" + s + "\" op: \"batch_norm\" input: \"conv" + s + "\" }\n";
    text += "node { name: \"relu" + s + "\" op: \"relu\" input: \"bn" + s + "\" }\n";
    text += "node { name: \"drop" + s + "\" op: \"dropout\" input: \"relu" + s +
            "\" attr { key: \"p\" value: \"0.1\" } }\n";
    prev = "drop" + s;
  }
  text += "node { name: \"pool\" op: \"pooling\" input: \"" + prev +
          "\" attr { key: \"kernel\" value: \"(2,2)\" } attr { key: \"stride\" value: \"(2,2)\" } }\n";
  text += "node { name: \"flat\" op: \"flatten\" input: \"pool\" }\n";
  text += "node { name: \"fc\" op: \"fully_connected\" input: \"flat\" attr { key: \"num_hidden\" value: \"10\" } }\n";
  text += "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc\" input: \"label\" }\n";
  text += "data { batch_size: 8 sample_shape: [3, 8, 8] }\nsolver { lr: 0.05 seed: 5 }\n";
  return ParseConfig(text, "residual.prototxt", {});
}

// One forward and backward step on the GPU; returns every parameter
// gradient (name order) and output 0, copied to the host.
std::vector<std::vector<float>> GpuStep(const ConfigFile& cfg, const MemoryStrategy& strategy) {
  Model m = BuildModel(cfg, strategy);
  auto engine = MakeEngine("threaded");
  Bindings b;
  b.device = kGpu0;
  std::map<std::string, Tensor> grads;
  uint32_t state = 1;
  auto fill = [&](const Shape& s, bool labels) {
    Tensor host = Tensor::Empty(s);
    for (int64_t i = 0; i < host.size(); ++i) {
      state = state * 1664525u + 1013904223u;
      host.f()[i] = labels ? static_cast<float>((state >> 28) % 10) : static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
    }
    Tensor t = Tensor::Empty(s, DType::kFloat32, kGpu0, MemKind::kParam);
    t.CopyFrom(host);
    return t;
  };
  for (int id : m.params) {
    const Node& n = m.train.node(id);
    b.vars[n.name] = fill(m.train.shape({id, 0}), false);
    b.grads[n.name] = grads[n.name] = Tensor::Empty(m.train.shape({id, 0}), DType::kFloat32, kGpu0, MemKind::kParam);
  }
  for (int id : m.aux) b.vars[m.train.node(id).name] = fill(m.train.shape({id, 0}), false);
  b.vars["data"] = fill(m.data_shape, false);
  b.vars["label"] = fill(m.label_shape, true);
  // The arena is one allocation of exactly the plan's bytes.
  const int64_t before = MemoryAccounting::Get().Current(kGpu0, MemKind::kArena);
  Executor exec(m.train, m.train_plan, b, engine.get());
  EXPECT_EQ(MemoryAccounting::Get().Current(kGpu0, MemKind::kArena) - before, m.train_plan.arena_bytes);
  exec.Run(true, 0, 11);
  std::vector<std::vector<float>> out;
  auto host = [](const Tensor& t) {
    const Tensor h = t.OnHost();
    return std::vector<float>(h.f(), h.f() + h.size());
  };
  for (const auto& [name, g] : grads) out.push_back(host(g));
  out.push_back(host(exec.output(0)));
  return out;
}

TEST(CudaRecompute, EveryStrategyGivesTheBitsOfNone) {
  FRUGAL_REQUIRE_GPU();
  const ConfigFile cfg = ResidualNet();
  const auto reference = GpuStep(cfg, MemoryStrategy::kNone);
  for (const MemoryStrategy& s : AllMemoryStrategies()) EXPECT_EQ(GpuStep(cfg, s), reference) << s.Name();
}

// ------------------------------------------------------------------- CLI

TEST(CudaCli, GpusWithoutADeviceIsAClearError) {
  if (backend::CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  const test::RunResult r = test::RunFrugal("time --config models/mlp/fashion_mnist.prototxt --gpus 0 --iters 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpus 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(backend::BuiltWithCuda() ? "no CUDA device" : "without CUDA"), std::string::npos) << r.output;
}

TEST(CudaCli, TimeRefusesTwoGpus) {
  const test::RunResult r = test::RunFrugal("time --config models/mlp/fashion_mnist.prototxt --gpus 0,1 --iters 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpus 0,1: this command runs on one GPU (--gpus 0); frugal train takes several"),
            std::string::npos)
      << r.output;
}

TEST(CudaCli, TrainOnSeveralGpusWithoutThemIsAClearError) {
  if (backend::CudaDeviceCount() > 1) GTEST_SKIP() << "this machine has two CUDA devices";
  test::RunResult r = test::RunFrugal("train --config models/mlp/fashion_mnist.prototxt --gpus 0,1 --max-iters 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpus 0,1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(backend::BuiltWithCuda() ? "CUDA device" : "without CUDA"), std::string::npos) << r.output;
  r = test::RunFrugal("train --config models/mlp/fashion_mnist.prototxt --gpus 1,1 --max-iters 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpus 1,1: GPU 1 is named twice"), std::string::npos) << r.output;
}

// A CPU run never loads cuBLAS (about 150 MiB resident through libcublasLt):
// the CUDA backend opens it when a GPU needs it. The loader's log of the
// files it opens (LD_DEBUG=files) must show oneDNN, and no cuBLAS.
TEST(CudaCli, CpuRunDoesNotLoadCublas) {
  const test::RunResult r = test::RunShell(std::string("LD_DEBUG=files ") + FRUGAL_BIN +
                                           " time --config models/mlp/fashion_mnist.prototxt --iters 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("libdnnl"), std::string::npos) << "LD_DEBUG=files logged nothing:\n" << r.output;
  EXPECT_EQ(r.output.find("libcublas"), std::string::npos) << r.output;
}

TEST(CudaCli, BadGpuListIsAClearError) {
  const test::RunResult r = test::RunFrugal("time --config models/mlp/fashion_mnist.prototxt --gpus x --iters 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpus"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal
