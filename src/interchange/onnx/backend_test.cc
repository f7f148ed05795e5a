// The ONNX backend test runner: import, infer shapes, plan memory, run
// inference, compare with the expected outputs.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/onnx.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "onnx.pb.h"

namespace frugal {
namespace {

namespace fs = std::filesystem;

// ONNX's backend tests compare with numpy's assert_allclose at these
// tolerances (onnx/backend/test/runner: rtol=1e-3, atol=1e-7); every op is
// held to them.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

bool Close(float y, float e) {
  if (std::isnan(e) || std::isnan(y)) return std::isnan(e) && std::isnan(y);
  if (y == e) return true;  // also equal infinities
  return std::fabs(static_cast<double>(y) - e) <= kAtol + kRtol * std::fabs(static_cast<double>(e));
}

// "" when y matches the expected tensor, else what differs.
std::string Compare(const Tensor& y, const OnnxTensor& e, const std::string& what) {
  if (y.shape() != e.shape()) return Fmt(what, " has shape ", y.shape(), ", expected ", e.shape());
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < y.size(); ++k) {
    if (Close(y.f()[k], e.f[k])) continue;
    if (bad++ == 0) first = k;
  }
  if (bad == 0) return "";
  const float yv = y.f()[first], ev = e.f[first];
  return Fmt(what, ": ", bad, " of ", y.size(), " values differ; at ", first, " got ", yv, ", expected ", ev,
             " (|diff| ", std::fabs(yv - ev), " > ", kAtol + kRtol * std::fabs(ev), ")");
}

// input_0.pb, input_1.pb, ... (or output_) in order, while they exist.
std::vector<std::string> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / Fmt(prefix, "_", k, ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p.string());
  }
  return files;
}

struct Outcome {
  OnnxTestStatus status;
  std::string reason;
  std::vector<OnnxUnsupported> unsupported;
};

// One data set: inputs by name of the graph inputs that are not initializers;
// their values known at import (folded where an op computes on them), or
// only their shapes (fed at run time, the kernels compute).
Outcome RunDataSet(const onnx::ModelProto& model, const std::vector<std::string>& input_names, const fs::path& set,
                   bool fold_inputs) {
  const std::vector<std::string> in_files = NumberedFiles(set, "input"), out_files = NumberedFiles(set, "output");
  if (in_files.size() > input_names.size())
    return {OnnxTestStatus::kFailed,
            Fmt(set.filename().string(), " has ", in_files.size(), " inputs; the model takes ", input_names.size())};
  OnnxImportOptions opts;
  std::map<std::string, OnnxTensor> fed;
  for (size_t k = 0; k < in_files.size(); ++k) {
    OnnxTensor t = ReadOnnxTensorFile(in_files[k]);
    opts.input_shapes[input_names[k]] = t.shape();
    if (fold_inputs) opts.known_values[input_names[k]] = t;
    fed[input_names[k]] = std::move(t);
  }
  OnnxImport imp = ImportOnnx(model, opts);
  if (!imp.unsupported.empty())
    return {OnnxTestStatus::kUnsupported, DescribeUnsupported(imp.unsupported), imp.unsupported};
  if (out_files.size() != imp.graph.outputs.size())
    return {OnnxTestStatus::kFailed,
            Fmt(out_files.size(), " expected outputs; the graph has ", imp.graph.outputs.size())};
  std::vector<OnnxTensor> expected;
  for (const std::string& f : out_files) {
    expected.push_back(ReadOnnxTensorFile(f));
    if (expected.back().kind != OnnxTensor::Kind::kFloat)
      return {OnnxTestStatus::kUnsupported, "an output of type " + expected.back().type_name};
    if (expected.back().NumElements() == 0) return {OnnxTestStatus::kUnsupported, "a zero-size output"};
  }

  Bindings b;
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& in : imp.inputs) {
    const std::string& name = imp.graph.node(in.node).name;
    // Values read only as attributes may be empty (ReduceSum's axes); tensors may not.
    if (fed.at(in.onnx_name).NumElements() == 0)
      return {OnnxTestStatus::kUnsupported, "'" + in.onnx_name + "' is a zero-size tensor"};
    b.vars[name] = ToTensor(fed.at(in.onnx_name), MemKind::kInput);
    shapes.push_back({name, b.vars[name].shape()});
  }
  for (const auto& [name, value] : imp.values) {
    b.vars[name] = value;
    shapes.push_back({name, value.shape()});
  }
  InferShapes(&imp.graph, shapes);
  MemoryPlan plan = PlanMemory(imp.graph, MemoryStrategy::kShare);
  if (std::string bad = VerifyPlan(imp.graph, plan); !bad.empty())
    return {OnnxTestStatus::kFailed, "unsound memory plan: " + bad};
  std::unique_ptr<Engine> engine = MakeEngine("naive");
  Executor exec(imp.graph, plan, b, engine.get());
  exec.Run(/*is_train=*/false, /*step=*/0, /*seed=*/1);
  for (size_t k = 0; k < expected.size(); ++k) {
    std::string bad =
        Compare(exec.output(static_cast<int>(k)), expected[k], Fmt("output ", k, " '", imp.output_names[k], "'"));
    if (!bad.empty()) return {OnnxTestStatus::kFailed, bad};
  }
  return {OnnxTestStatus::kPassed, ""};
}

}  // namespace

OnnxTestResult RunOnnxBackendTest(const std::string& dir, bool fold_inputs) {
  OnnxTestResult r;
  r.dir = dir;
  const fs::path root(dir);
  if (!fs::exists(root / "model.onnx")) {
    r.status = OnnxTestStatus::kUnsupported;
    r.reason = "no model.onnx (the ONNX package leaves the large real-model tests to download)";
    return r;
  }
  try {
    onnx::ModelProto model = ReadOnnxModel((root / "model.onnx").string());
    std::set<std::string> inits;
    for (const auto& t : model.graph().initializer()) inits.insert(t.name());
    std::vector<std::string> input_names;
    for (const auto& in : model.graph().input())
      if (!inits.count(in.name())) input_names.push_back(in.name());
    // Sequences, maps and optionals are not TensorProto files: stop before reading them.
    for (const auto* list : {&model.graph().input(), &model.graph().output()}) {
      for (const auto& v : *list) {
        if (v.type().has_tensor_type() || inits.count(v.name())) continue;
        r.status = OnnxTestStatus::kUnsupported;
        r.reason = "'" + v.name() + "' is not a tensor (a sequence, map or optional)";
        return r;
      }
    }
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
      r.reason = "no test_data_set_N folder";
      return r;
    }
    for (const fs::path& set : sets) {
      Outcome o = RunDataSet(model, input_names, set, fold_inputs);
      r.status = o.status;
      r.reason = o.reason;
      r.unsupported = o.unsupported;
      if (o.status != OnnxTestStatus::kPassed) {
        if (sets.size() > 1) r.reason = set.filename().string() + ": " + r.reason;
        return r;
      }
    }
  } catch (const std::exception& e) {  // frugal::Error and anything a library throws
    r.status = OnnxTestStatus::kFailed;
    r.reason = e.what();
  }
  return r;
}

std::vector<std::string> FindOnnxTests(const std::vector<std::string>& dirs) {
  std::vector<std::string> tests;
  for (const std::string& d : dirs) {
    const fs::path p(d);
    FRUGAL_REQUIRE(fs::is_directory(p), d, ": not a directory (give ONNX backend test folders)");
    if (fs::exists(p / "model.onnx")) {
      tests.push_back(d);
      continue;
    }
    std::vector<std::string> sub;
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_directory()) sub.push_back(e.path().string());
    FRUGAL_REQUIRE(!sub.empty(), d, ": neither a test (no model.onnx) nor a folder of tests");
    std::sort(sub.begin(), sub.end());
    tests.insert(tests.end(), sub.begin(), sub.end());
  }
  return tests;
}

}  // namespace frugal
