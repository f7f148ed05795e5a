#include "train/feed.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>

#include "backend/device.h"

namespace frugal {

std::unique_ptr<DataIter> LoadSource(const ConfigFile& cfg, const config::DataSource& src, const std::string& what,
                                     const DataShapes& shapes, bool shuffle, Shard shard) {
  DataIterOptions o;
  o.shard = shard;
  o.batch_size = shapes.batch;
  o.shuffle = shuffle;
  o.seed = cfg.net.solver().seed();
  const Shape want(std::vector<int64_t>(shapes.data.dims().begin() + 1, shapes.data.dims().end()));
  o.sample_shape = want;
  o.where = cfg.path + ": data." + what;
  std::unique_ptr<DataIter> it;
  try {
    it = MakeDataIter(src, o);
  } catch (const Error& e) {
    // A relative path that is not there: say where it was looked for.
    config::DataSource copy = src;
    for (const std::string* p : DataPaths(&copy)) {
      std::error_code ec;
      if ((*p)[0] == '/' || std::filesystem::exists(*p, ec)) continue;
      throw Error(Fmt(e.what(), " [", cfg.path, ": data.", what, ": ", *p,
                      " is read relative to the working directory ", std::filesystem::current_path(ec).string(),
                      ", not the config's folder: run frugal from the folder the path is relative to (the "
                      "repository root for models/), or give an absolute path]"));
    }
    throw;
  }
  FRUGAL_REQUIRE(it->sample_shape() == want, cfg.path, ": data.sample_shape is ", want, " but the data has samples of ",
                 it->sample_shape());
  const Shape label(std::vector<int64_t>(shapes.label.dims().begin() + 1, shapes.label.dims().end()));
  FRUGAL_REQUIRE(it->label_shape() == label, cfg.path, ": data.label_shape is ", label, " but the data has labels of ",
                 it->label_shape(), " (set data.label_shape)");
  return it;
}

Feed::Feed(Session* s, const Executor& exec, const BatchInputs& in)
    : s_(s), exec_(exec), in_(in), metrics_var_(s->NewVar()) {}

void Feed::Skip(DataIter* it, int64_t n) {
  const auto [x, y] = LoadTargets();
  for (int64_t b = 0; b < n; ++b) it->Next(x.f(), y.f(), &num_valid_);
}

void Feed::PushRead(DataIter* it, int64_t begin_epoch, const std::vector<Var>& writes) {
  PushOptions o;
  o.kind = FnKind::kIO;
  o.name = "load_batch";
  s_->engine->Push(
      [it, begin_epoch, xy = LoadTargets(), num_valid = &num_valid_] {
        if (begin_epoch >= 0) it->Reset(begin_epoch);
        CHECK(it->Next(xy.first.f(), xy.second.f(), num_valid)) << "a batch was loaded past the end of the epoch";
      },
      {}, writes, o);
}

std::vector<Var> Feed::OutputReads() const {
  std::vector<Var> reads{in_.label_var};
  for (int k = 0; k < static_cast<int>(exec_.graph().outputs.size()); ++k) reads.push_back(exec_.output_var(k));
  std::sort(reads.begin(), reads.end());  // outputs may share a block's variable
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  return reads;
}

namespace {

std::vector<Tensor> Outputs(const Executor& exec) {
  std::vector<Tensor> outputs;
  for (int k = 0; k < static_cast<int>(exec.graph().outputs.size()); ++k) outputs.push_back(exec.output(k));
  return outputs;
}

// The graph's outputs (values: the executor's or their host copies) as the
// metrics read them, each of the kind its op makes.
std::vector<Prediction> Predictions(const Executor& exec, const std::vector<Tensor>& values) {
  std::vector<Prediction> p;
  for (size_t k = 0; k < values.size(); ++k) {
    const Node& n = exec.graph().node(exec.graph().outputs[k].node);
    const bool loss_and_rank = n.op && n.op->outputs_loss_and_rank();
    p.emplace_back(values[k], loss_and_rank ? OutputKind::kLossAndRank : OutputKind::kValues);
  }
  return p;
}

// The metrics of one batch on a CPU worker, writing metrics_var.
void PushMetricUpdate(Engine* engine, std::vector<MetricSet*> ms, std::vector<Prediction> outputs, Tensor y,
                      const int64_t* num_valid, WindowTally* tally, const std::vector<Var>& reads, Var metrics_var) {
  PushOptions o;
  o.name = "metrics";
  engine->Push(
      [ms, outputs, y, num_valid, tally] {
        for (MetricSet* m : ms) m->Update(outputs, y, *num_valid);
        if (!tally) return;
        tally->samples += *num_valid;
        tally->last_in = std::chrono::steady_clock::now();
      },
      reads, {metrics_var}, o);
}

// The CPU: batches straight into the bound tensors, metrics on the outputs.
class HostFeed : public Feed {
 public:
  HostFeed(Session* s, const Executor& exec, const BatchInputs& in) : Feed(s, exec, in) {}

  void PushLoad(DataIter* it, int64_t begin_epoch) override {
    PushRead(it, begin_epoch, {in_.data_var, in_.label_var});
  }

  void PushMetrics(std::vector<MetricSet*> ms, WindowTally* tally) override {
    PushMetricUpdate(s_->engine, std::move(ms), Predictions(exec_, Outputs(exec_)), in_.label, &num_valid_, tally,
                     OutputReads(), metrics_var_);
  }

 protected:
  std::pair<Tensor, Tensor> LoadTargets() const override { return {in_.data, in_.label}; }
};

Tensor Pinned(const Shape& shape) {
  return Tensor(std::make_shared<Storage>(Device{}, shape.Size() * DTypeBytes(DType::kFloat32), MemKind::kInput,
                                          /*pinned=*/true),
                0, shape, DType::kFloat32);
}

// A GPU: the batch is loaded into pinned host tensors (host_var_), then
// copied on the GPU's stream into the executor's inputs; the metrics read a
// host copy of the labels and of the batch's number of rows (metric_var_,
// written by that copy) and host copies of the executor's outputs
// (fetched_var_).
class PinnedFeed : public Feed {
 public:
  PinnedFeed(Session* s, const Executor& exec, const BatchInputs& in)
      : Feed(s, exec, in),
        host_data_(Pinned(s->model.data_shape)),
        host_label_(Pinned(s->model.label_shape)),
        metric_label_(Tensor::Empty(s->model.label_shape)),
        host_var_(s->NewVar()),
        metric_var_(s->NewVar()),
        fetched_var_(s->NewVar()) {
    for (int k = 0; k < static_cast<int>(exec.graph().outputs.size()); ++k)
      fetched_.push_back(Pinned(exec.output(k).shape()));
  }

  void PushLoad(DataIter* it, int64_t begin_epoch) override {
    PushRead(it, begin_epoch, {host_var_});
    s_->PushOn(
        [this](cuda::Context* cuda) {
          metric_label_.CopyFrom(host_label_);
          metric_valid_ = num_valid_;
          const Device dev = s_->dev;
          backend::CopyAsync(cuda, in_.data.raw(), dev, host_data_.raw(), Device{}, in_.data.bytes());
          backend::CopyAsync(cuda, in_.label.raw(), dev, host_label_.raw(), Device{}, in_.label.bytes());
        },
        {host_var_}, {in_.data_var, in_.label_var, metric_var_}, "copy_batch_to_gpu");
  }

  // The outputs to pinned host memory first, then the metrics on the host.
  void PushMetrics(std::vector<MetricSet*> ms, WindowTally* tally) override {
    s_->PushOn(
        [outputs = Outputs(exec_), host = fetched_, dev = s_->dev](cuda::Context* cuda) {
          for (size_t k = 0; k < outputs.size(); ++k)
            backend::CopyAsync(cuda, host[k].raw(), Device{}, outputs[k].raw(), dev, outputs[k].bytes());
        },
        OutputReads(), {fetched_var_}, "copy_outputs_to_host");
    PushMetricUpdate(s_->engine, std::move(ms), Predictions(exec_, fetched_), metric_label_, &metric_valid_, tally,
                     {fetched_var_, metric_var_}, metrics_var_);
  }

 protected:
  std::pair<Tensor, Tensor> LoadTargets() const override { return {host_data_, host_label_}; }

 private:
  Tensor host_data_, host_label_, metric_label_;
  int64_t metric_valid_ = 0;
  const Var host_var_, metric_var_, fetched_var_;
  std::vector<Tensor> fetched_;  // pinned host copies of the executor's outputs
};

}  // namespace

std::unique_ptr<Feed> MakeFeed(Session* s, const Executor& exec, const BatchInputs& in) {
  if (s->on_gpu()) return std::make_unique<PinnedFeed>(s, exec, in);
  return std::make_unique<HostFeed>(s, exec, in);
}

}  // namespace frugal
