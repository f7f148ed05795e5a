// Inference with a trained model: PredictionGraph, Predictor and
// TokenSampler (frugal/predict.h).
#include "frugal/predict.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "frugal/checkpoint.h"
#include "frugal/op.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "frugal/train.h"

namespace frugal {

Graph PredictionGraph(const Graph& fwd) {
  Graph full = fwd;
  for (Entry& out : full.outputs) {
    const Node n = full.node(out.node);  // a copy: the prediction's nodes grow the graph
    if (n.op && n.op->predict()) out = n.op->predict()(full, n);
  }
  // Keep what the outputs read: inputs come before their readers, so one
  // backward sweep marks every node needed.
  std::vector<bool> needed(full.num_nodes(), false);
  for (const Entry& out : full.outputs) needed[out.node] = true;
  for (int i = full.num_nodes() - 1; i >= 0; --i)
    if (needed[i])
      for (const Entry& in : full.node(i).inputs) needed[in.node] = true;
  Graph g;
  std::vector<int> moved(full.num_nodes(), -1);  // full's node -> g's
  for (int i = 0; i < full.num_nodes(); ++i) {
    if (!needed[i]) continue;
    Node n = full.node(i);
    for (Entry& in : n.inputs) in.node = moved[in.node];
    moved[i] = g.AddNode(std::move(n));
  }
  for (const Entry& out : full.outputs) g.outputs.push_back({moved[out.node], out.index});
  return g;
}

Predictor::Predictor(const ConfigFile& cfg, const std::string& checkpoint)
    : graph_(PredictionGraph(BuildGraph(cfg))), seed_(cfg.net.solver().seed()) {
  const config::Data& dc = cfg.net.data();
  const DataShapes shapes = DataShapesOf(cfg);
  batch_ = shapes.batch;
  sample_shape_ = Shape(std::vector<int64_t>(dc.sample_shape().begin(), dc.sample_shape().end()));
  std::vector<std::pair<std::string, Shape>> inputs;
  bool reads_data = false;
  for (const Node& n : graph_.nodes()) {
    if (n.var != VarKind::kInput) continue;
    FRUGAL_REQUIRE(n.name == dc.data_name() || n.name == dc.label_name(), cfg.path, ": the graph reads input '", n.name,
                   "', but predict feeds only data.data_name '", dc.data_name(), "' (and zeros as data.",
                   "label_name '", dc.label_name(), "')");
    reads_data = reads_data || n.name == dc.data_name();
    inputs.push_back({n.name, n.name == dc.data_name() ? shapes.data : shapes.label});
  }
  FRUGAL_REQUIRE(reads_data, cfg.path, ": the graph's outputs do not read data.data_name '", dc.data_name(),
                 "': there is nothing to predict from");
  InferShapes(&graph_, inputs);
  ChooseLayouts(&graph_);
  const MemoryStrategy s = ConfigStrategy(cfg);
  // Inference keeps nothing for a backward pass: sharing alone is enough.
  plan_ = PlanMemory(graph_, s.shares() ? MemoryStrategy::kShare : s);

  for (const Entry& out : graph_.outputs) {
    const Shape& shape = graph_.shape(out);
    const std::string name = graph_.node(out.node).name + (out.index > 0 ? Fmt(":", out.index) : "");
    FRUGAL_REQUIRE(graph_.dtype(out) == DType::kFloat32, cfg.path, ": output ", name, " is ",
                   DTypeName(graph_.dtype(out)), "; predict writes float32 outputs");
    FRUGAL_REQUIRE(shape.ndim() >= 1 && shape[0] % batch_ == 0, cfg.path, ": output ", name, " has shape ", shape,
                   ", not a row (or rows) per sample of the batch of ", batch_, ": predict cannot split it by sample");
    std::vector<int64_t> dims(shape.dims().begin() + 1, shape.dims().end());
    if (shape[0] > batch_) dims.insert(dims.begin(), shape[0] / batch_);
    output_names_.push_back(name);
    output_shapes_.push_back(Shape(dims));
  }

  // Parameters and aux state from the checkpoint: exactly those the graph
  // reads (a pruned loss branch's are left in the file).
  const CheckpointState c = LoadCheckpoint(checkpoint);
  Bindings b;
  std::map<std::string, Tensor> want, have;
  for (int i = 0; i < graph_.num_nodes(); ++i) {
    const Node& n = graph_.node(i);
    if (n.var != VarKind::kParam && n.var != VarKind::kAux) continue;
    want[n.name] = b.vars[n.name] = Tensor::Empty(graph_.shape({i, 0}), DType::kFloat32, {}, MemKind::kParam);
    for (const auto* part : {&c.params, &c.aux})
      if (part->count(n.name)) have[n.name] = part->at(n.name);
  }
  try {
    RestoreTensors(have, want, "parameters and aux state", checkpoint);
  } catch (const Error& e) {
    // Before version 3 the stored variables are the declared ones, not the run's.
    const std::string hint = c.version >= 3 ? VariableDifference(cfg, c.config_text, checkpoint) : "";
    if (hint.empty()) throw;
    throw Error(Fmt(e.what(), "; ", hint));
  }
  data_ = b.vars[dc.data_name()] = Tensor::Empty(shapes.data, DType::kFloat32, {}, MemKind::kInput);
  if (graph_.FindNode(dc.label_name()) >= 0) {
    // Zeros: a class index every loss head accepts; no prediction reads it.
    Tensor label = b.vars[dc.label_name()] = Tensor::Empty(shapes.label, DType::kFloat32, {}, MemKind::kInput);
    label.Fill(0);
  }
  engine_ = MakeEngineFor(cfg.net.solver(), graph_);
  exec_ = std::make_unique<Executor>(graph_, plan_, b, engine_.get());
}

Predictor::~Predictor() { exec_.reset(); }  // waits for the engine before it goes

std::vector<std::vector<float>> Predictor::Run(const float* x, int64_t n) {
  const int64_t sample = sample_shape_.Size();
  std::vector<std::vector<float>> out(output_shapes_.size());
  for (size_t k = 0; k < out.size(); ++k) out[k].reserve(n * output_shapes_[k].Size());
  for (int64_t first = 0; first < n; first += batch_) {
    const int64_t rows = std::min(batch_, n - first);
    float* d = data_.f();
    std::memcpy(d, x + first * sample, rows * sample * sizeof(float));
    std::fill(d + rows * sample, d + batch_ * sample, 0.f);
    exec_->Run(/*is_train=*/false, step_++, seed_);
    for (size_t k = 0; k < out.size(); ++k) {
      // Rows of a sample are contiguous (its K rows are rows s*K .. s*K+K-1).
      const float* y = exec_->output(static_cast<int>(k)).f();
      out[k].insert(out[k].end(), y, y + rows * output_shapes_[k].Size());
    }
  }
  return out;
}

int64_t TokenSampler::Sample(const float* p, int64_t n, const SampleOptions& o, const std::vector<bool>& allowed) {
  std::vector<int64_t> classes;
  for (int64_t c = 0; c < n; ++c)
    if ((allowed.empty() || allowed[c]) && p[c] > 0) classes.push_back(c);
  FRUGAL_REQUIRE(!classes.empty(), "no class the sampler may draw has a positive probability (", n,
                 " classes); is the model's output probabilities?");
  // Most probable first, ties to the lower class.
  std::stable_sort(classes.begin(), classes.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  if (o.temperature <= 0) return classes[0];
  if (o.top_k > 0 && static_cast<int64_t>(classes.size()) > o.top_k) classes.resize(o.top_k);
  // p^(1/T) relative to the largest: no underflow of them all at a low T.
  const double top = std::log(static_cast<double>(p[classes[0]]));
  std::vector<double> w(classes.size());
  for (size_t k = 0; k < classes.size(); ++k)
    w[k] = std::exp((std::log(static_cast<double>(p[classes[k]])) - top) / o.temperature);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  double sum = 0;
  for (size_t k = 0; k < classes.size(); ++k) {
    sum += w[k];
    if (u < sum) return classes[k];
  }
  return classes.back();  // rounding left u at the total
}

}  // namespace frugal
