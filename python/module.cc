// The extension of the Python package `frugal` (frugal._frugal, pybind11;
// python/frugal/__init__.py exports it): a config's model to plan, train,
// load, save and predict with, and ONNX export. frugal's errors are raised
// as frugal.Error with the same one line; training and prediction release
// the GIL. docs/guide/python.md is the guide.
#include <glog/logging.h>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <iterator>
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/import.h"
#include "frugal/onnx.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/predict.h"
#include "frugal/train.h"
#include "onnx.pb.h"

namespace py = pybind11;

namespace frugal {
namespace {

namespace fs = std::filesystem;

// "name=value" for each define, the value as Python's str() writes it.
std::vector<std::string> Defines(const std::map<std::string, py::object>& defines) {
  std::vector<std::string> out;
  for (const auto& [name, value] : defines) out.push_back(name + "=" + py::str(value).cast<std::string>());
  return out;
}

// A JSON object as a Python dict.
py::dict JsonDict(const std::string& json) { return py::module_::import("json").attr("loads")(json); }

// An array's dims from dim `from` on.
std::vector<int64_t> DimsOf(const py::array& a, py::ssize_t from = 0) {
  std::vector<int64_t> d;
  for (py::ssize_t k = from; k < a.ndim(); ++k) d.push_back(a.shape(k));
  return d;
}

// A shape as Python writes it, "(N, 1, 28, 28)", "(64,)": `first` (a dim,
// "N", or nothing) and then dims.
std::string PyShape(const std::string& first, const std::vector<int64_t>& dims) {
  std::vector<std::string> parts;
  if (!first.empty()) parts.push_back(first);
  for (int64_t d : dims) parts.push_back(std::to_string(d));
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return "(" + s + (parts.size() == 1 ? ",)" : ")");
}

// Whether an array is (N, *dims) with N >= 1.
bool Batched(const py::array& a, const std::vector<int64_t>& dims) {
  return a.ndim() >= 1 && a.shape(0) >= 1 && DimsOf(a, 1) == dims;
}

// One sample's shape of a config's data or label (without the batch dim).
Shape SampleOf(const Shape& batched) {
  return Shape(std::vector<int64_t>(batched.dims().begin() + 1, batched.dims().end()));
}

// Samples and labels from Python, (N, *sample_shape) and (N, *label_shape),
// as float32 arrays (cast where they are not), for an ArrayIter.
struct Arrays {
  py::array_t<float, py::array::c_style | py::array::forcecast> x, y;

  Arrays(const py::tuple& xy, const char* what) {
    FRUGAL_REQUIRE(xy.size() == 2, "Model.train: ", what, " is a tuple of ", xy.size(),
                   " items; give (samples, labels)");
    x = xy[0].cast<py::array>();
    y = xy[1].cast<py::array>();
  }

  // Checks the shapes against the config's data and makes the iterator.
  std::unique_ptr<DataIter> Iter(const ConfigFile& cfg, const char* what, uint64_t seed, bool shuffle) const {
    const DataShapes shapes = DataShapesOf(cfg);  // with the batch dim
    const std::vector<int64_t> sample = SampleOf(shapes.data).dims(), label = SampleOf(shapes.label).dims();
    const int64_t n = x.ndim() >= 1 ? x.shape(0) : 0;
    FRUGAL_REQUIRE(Batched(x, sample), "Model.train: ", what, "'s samples are ", PyShape("", DimsOf(x)), " but ",
                   cfg.path, " takes ", PyShape("N", sample), " with N >= 1 (data.sample_shape)");
    FRUGAL_REQUIRE(Batched(y, label) && y.shape(0) == n, "Model.train: ", what, "'s labels are ",
                   PyShape("", DimsOf(y)), " for ", n, " samples; ", cfg.path, " takes ",
                   PyShape(std::to_string(n), label), " (data.label_shape)");
    return std::make_unique<ArrayIter>(x.data(), Shape(sample), y.data(), Shape(label), n, Fmt("Model.train ", what),
                                       cfg.net.data().batch_size(), shuffle, seed);
  }
};

// Batches from Python: an iterable of (samples, labels) with len() (a
// list, a DataLoader), walked again from iter() at each epoch; a batch may
// hold fewer rows than the config's batch_size, the rest wrapping to the
// first batch of the epoch as ArrayIter's last batch wraps to the epoch's
// start. Next runs on the trainer's threads, so it takes the GIL.
class BatchIter : public DataIter {
 public:
  BatchIter(py::object batches, Shape sample, Shape label, int64_t batch, std::string name, const std::string& path)
      : batches_(std::move(batches)),
        sample_(std::move(sample)),
        label_(std::move(label)),
        batch_(batch),
        name_(std::move(name)),
        path_(path) {
    try {
      len_ = static_cast<int64_t>(py::len(batches_));
    } catch (py::error_already_set&) {
      throw Error(Fmt(name_, ": an iterable without len(); give (samples, labels) arrays, or batches whose count ",
                      "len() gives (a list, a DataLoader)"));
    }
    FRUGAL_REQUIRE(len_ > 0, name_, ": len() is 0; give at least one (samples, labels) batch");
  }
  ~BatchIter() override {
    py::gil_scoped_acquire gil;
    it_ = py::object();
    batches_ = py::object();
  }

  void Reset(int64_t) override {
    py::gil_scoped_acquire gil;
    it_ = py::iter(batches_);
    position_ = 0;
  }

  bool Next(float* data, float* label, int64_t* num_valid) override {
    py::gil_scoped_acquire gil;
    if (!it_) it_ = py::iter(batches_);
    const std::string where = Fmt(name_, ": batch ", position_);
    Rows x, y;
    try {
      py::object item = py::reinterpret_steal<py::object>(PyIter_Next(it_.ptr()));
      if (!item) {
        if (PyErr_Occurred()) throw py::error_already_set();
        return false;
      }
      FRUGAL_REQUIRE(py::isinstance<py::tuple>(item) && py::len(item) == 2, where, " is not a (samples, labels) tuple");
      x = Rows::ensure(item.cast<py::tuple>()[0]);
      y = Rows::ensure(item.cast<py::tuple>()[1]);
      FRUGAL_REQUIRE(x && y, where, ": its samples and labels must be arrays of numbers (numpy arrays)");
    } catch (py::error_already_set& e) { throw Error(Fmt(where, ": ", e.what())); }
    const int64_t rows = x.ndim() >= 1 ? x.shape(0) : 0;
    FRUGAL_REQUIRE(Batched(x, sample_.dims()) && rows <= batch_, where, "'s samples are ", PyShape("", DimsOf(x)),
                   " but ", path_, " takes ", PyShape("N", sample_.dims()), " with 1 <= N <= ", batch_,
                   " (data.sample_shape, batch_size)");
    FRUGAL_REQUIRE(Batched(y, label_.dims()) && y.shape(0) == rows, where, "'s labels are ", PyShape("", DimsOf(y)),
                   " for ", rows, " samples; ", path_, " takes ", PyShape(std::to_string(rows), label_.dims()),
                   " (data.label_shape)");
    const int64_t size = sample_.Size(), label_size = label_.Size();
    if (position_ == 0) {
      first_x_.assign(x.data(), x.data() + rows * size);
      first_y_.assign(y.data(), y.data() + rows * label_size);
    }
    const int64_t first_rows = static_cast<int64_t>(first_y_.size()) / std::max<int64_t>(label_size, 1);
    for (int64_t r = 0; r < batch_; ++r) {
      const bool own = r < rows;
      const int64_t k = own ? r : (r - rows) % first_rows;
      std::copy_n((own ? x.data() : first_x_.data()) + k * size, size, data + r * size);
      std::copy_n((own ? y.data() : first_y_.data()) + k * label_size, label_size, label + r * label_size);
    }
    if (num_valid != nullptr) *num_valid = rows;
    ++position_;
    return true;
  }

  int64_t batch_size() const override { return batch_; }
  Shape sample_shape() const override { return sample_; }
  Shape label_shape() const override { return label_; }
  int64_t num_samples() const override { return len_ * batch_; }  // at most: a short batch counts whole
  int64_t batches_per_epoch() const override { return len_; }
  std::string Describe() const override {
    return Fmt(name_, ": ", len_, " batches of up to ", batch_, " samples of ", sample_, " from Python");
  }

 private:
  using Rows = py::array_t<float, py::array::c_style | py::array::forcecast>;
  py::object batches_, it_;
  Shape sample_, label_;
  int64_t batch_;
  std::string name_, path_;
  int64_t len_ = 0, position_ = 0;
  std::vector<float> first_x_, first_y_;  // the epoch's first batch: what short batches wrap to
};

// A data source given to Model.train: (samples, labels) arrays, or an
// iterable of such batches (BatchIter).
std::unique_ptr<DataIter> SourceIter(const py::object& source, std::optional<Arrays>* arrays, const ConfigFile& cfg,
                                     const char* what, uint64_t seed, bool shuffle) {
  if (py::isinstance<py::tuple>(source)) {
    *arrays = Arrays(source.cast<py::tuple>(), what);
    return (*arrays)->Iter(cfg, what, seed, shuffle);
  }
  const DataShapes shapes = DataShapesOf(cfg);  // with the batch dim
  return std::make_unique<BatchIter>(source, SampleOf(shapes.data), SampleOf(shapes.label), cfg.net.data().batch_size(),
                                     Fmt("Model.train ", what), cfg.path);
}

// The model of a config: frugal.Model(config, defines={...}).
class PyModel {
 public:
  PyModel(const std::string& config, const std::map<std::string, py::object>& defines)
      : cfg_(LoadConfig(config, Defines(defines))) {}

  ~PyModel() {
    if (!own_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(own_dir_, ec);
    }
  }

  // `frugal plan --json`'s object for one strategy ("sqrt",
  // "budget=60MiB", "limit=2GiB"; the config's own when empty).
  py::dict Plan(const std::string& memory) const {
    const MemoryStrategy s = StrategyOf(memory);
    DataSources data;
    if (s.limit()) data = OpenDataToPlan(cfg_);  // a limit bounds the process, which holds the data
    return JsonDict(ModelPlanJson(BuildModel(cfg_, s), s));
  }

  // The live bytes of the training step under a strategy, by kind, at up
  // to `points` steps (frugal plan --timeline's data): a dict of numpy
  // arrays (steps; forward, recomputed, gradients, workspace) and the peak.
  py::dict Timeline(const std::string& memory, int points) const {
    const MemoryStrategy s = StrategyOf(memory);
    const Model m = BuildModel(cfg_, s);
    const MemoryTimeline t = frugal::Timeline(m.train, m.train_plan, points);
    py::dict out;
    out["strategy"] = s.Name();
    out["steps"] = py::array_t<int>(t.steps.size(), t.steps.data());
    static const char* const kKeys[] = {"forward", "recomputed", "gradients", "workspace"};  // KindName's, short
    static_assert(std::size(kKeys) == MemoryTimeline::kNumKinds);
    for (int k = 0; k < MemoryTimeline::kNumKinds; ++k) {
      py::array_t<int64_t> bytes(t.bytes.size());
      for (size_t i = 0; i < t.bytes.size(); ++i) bytes.mutable_at(i) = t.bytes[i][k];
      out[kKeys[k]] = bytes;
    }
    out["num_steps"] = t.num_steps;
    out["backward_step"] = t.backward_step;
    out["peak_step"] = t.peak_step;
    out["peak_bytes"] = t.peak_bytes;
    out["peak_tensors"] = t.peak_tensors;
    return out;
  }

  // Trains as `frugal train` does, into checkpoint_dir (the config's
  // solver.checkpoint_dir, else a folder of the model's own, removed with
  // it). A model trained or loaded before continues from that checkpoint
  // (its parameters, optimizer state and place in the data). Each callback
  // gets each event (TrainEvent) as a dict, its "event" the kind; one that
  // returns True stops the run after the batch. Returns the last
  // validation accuracy (or training accuracy).
  double Train(std::optional<int64_t> epochs, std::optional<int64_t> max_iters, std::optional<double> lr,
               const std::string& checkpoint_dir, const std::vector<py::function>& callbacks,
               const std::string& log_json, bool quiet, const std::optional<py::object>& data,
               const std::optional<py::object>& val_data) {
    ConfigFile cfg = cfg_;
    config::Solver& sc = *cfg.net.mutable_solver();
    if (epochs) sc.set_epochs(*epochs);
    if (max_iters) sc.set_max_iters(*max_iters);
    if (lr) sc.set_lr(static_cast<float>(*lr));
    if (!checkpoint_dir.empty()) sc.set_checkpoint_dir(checkpoint_dir);
    if (sc.checkpoint_dir().empty()) sc.set_checkpoint_dir(OwnDir());
    TrainOptions opts;
    std::optional<Arrays> train_arrays, val_arrays;  // alive while the iterators read them
    DataSources arrays;
    if (data) {
      arrays.train = SourceIter(*data, &train_arrays, cfg, "data", sc.seed(), cfg.net.data().shuffle());
      if (val_data) arrays.val = SourceIter(*val_data, &val_arrays, cfg, "val_data", sc.seed(), /*shuffle=*/false);
      opts.data = &arrays;
    } else {
      FRUGAL_REQUIRE(!val_data,
                     "Model.train: val_data without data; give data=(x, y) too, or neither (the "
                     "config's data)");
    }
    opts.log_json = log_json;
    opts.resume = checkpoint_;
    opts.quiet = quiet;
    std::optional<py::error_already_set> raised;  // by a callback: the run stops, then it is raised
    bool asked_to_stop = false, stopped = false;
    opts.on_event = [&](const TrainEvent& e) {
      py::gil_scoped_acquire gil;
      if (e.kind == "stopped") {
        stopped = true;
        return false;
      }
      if (raised) return true;
      try {
        py::dict event = JsonDict(e.json);
        event["event"] = e.kind;
        for (const py::function& f : callbacks)
          if (py::object r = f(event); !r.is_none() && r.cast<bool>()) asked_to_stop = true;
      } catch (py::error_already_set& err) { raised = std::move(err); }
      return asked_to_stop || raised.has_value();
    };
    double acc = 0;
    {
      py::gil_scoped_release release;
      acc = frugal::Train(cfg, opts);
    }
    checkpoint_ = ResolveCheckpoint(sc.checkpoint_dir());
    predictor_.reset();
    if (raised) throw std::move(*raised);
    if (stopped && !asked_to_stop) {  // a signal (Ctrl-C): the checkpoint is kept
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
    return acc;
  }

  // The checkpoint (a file, or a folder's latest) whose parameters predict
  // and from which train continues.
  void Load(const std::string& path) {
    const std::string file = ResolveCheckpoint(path);
    LoadCheckpoint(file);  // verified now, not at the first use
    checkpoint_ = file;
    predictor_.reset();
  }

  // A copy of the model's checkpoint at path.
  void Save(const std::string& path) const {
    const std::string& trained = Trained(Fmt("Model.save(", path, ")"));
    std::error_code ec;
    fs::copy_file(trained, path, fs::copy_options::overwrite_existing, ec);
    FRUGAL_REQUIRE(!ec, "Model.save(", path, "): cannot write it (", ec.message(), ")");
  }

  // The graph's outputs for the samples x, (N, *sample_shape) (cast to
  // float32): an array (N, *output shape) for a model of one output, else a
  // dict of them by output name.
  py::object Predict(const py::array& x) {
    Predictor& p = Loaded();
    const Shape& sample = p.sample_shape();
    py::array_t<float, py::array::c_style | py::array::forcecast> in(x);
    FRUGAL_REQUIRE(Batched(in, sample.dims()), "Model.predict: samples of shape ", PyShape("", DimsOf(in)), " for ",
                   cfg_.path, "; it takes ", PyShape("N", sample.dims()), " with N >= 1 (data.sample_shape)");
    std::vector<std::vector<float>> outs;
    {
      py::gil_scoped_release release;
      outs = p.Run(in.data(), in.shape(0));
    }
    py::dict by_name;
    for (size_t k = 0; k < outs.size(); ++k) {
      std::vector<py::ssize_t> shape{in.shape(0)};
      for (int64_t d : p.output_shapes()[k].dims()) shape.push_back(d);
      auto* values = new std::vector<float>(std::move(outs[k]));  // owned by the array: no copy
      py::capsule owner(values, [](void* v) { delete static_cast<std::vector<float>*>(v); });
      by_name[py::str(p.output_names()[k])] = py::array_t<float>(shape, values->data(), owner);
    }
    if (outs.size() == 1) return by_name.begin()->second.cast<py::object>();
    return std::move(by_name);
  }

  std::vector<std::string> Outputs() { return Loaded().output_names(); }
  const std::string& checkpoint() const { return checkpoint_; }
  const std::string& config() const { return cfg_.path; }
  const ConfigFile& cfg() const { return cfg_; }

  // The checkpoint holding the model's parameters; an Error naming `what`
  // (the call) where it has none.
  const std::string& Trained(const std::string& what) const {
    FRUGAL_REQUIRE(!checkpoint_.empty(), what, ": ", cfg_.path,
                   " has no parameters yet (nothing to save, run or export): train() it or load() a checkpoint first");
    return checkpoint_;
  }

 private:
  // A strategy as `frugal plan --memory` takes it; "": the config's.
  MemoryStrategy StrategyOf(const std::string& memory) const {
    return memory.empty() ? ConfigStrategy(cfg_) : ParseMemoryStrategy(memory);
  }

  Predictor& Loaded() {
    if (!predictor_) predictor_ = std::make_unique<Predictor>(cfg_, Trained("Model.predict"));
    return *predictor_;
  }

  const std::string& OwnDir() {
    if (own_dir_.empty()) {
      std::string pattern = (fs::temp_directory_path() / "frugal-model-XXXXXX").string();
      FRUGAL_REQUIRE(mkdtemp(pattern.data()) != nullptr, "cannot make a folder in ", fs::temp_directory_path().string(),
                     " for the model's checkpoints: give checkpoint_dir=");
      own_dir_ = pattern;
    }
    return own_dir_;
  }

  ConfigFile cfg_;
  std::string checkpoint_;  // the last trained or loaded
  std::string own_dir_;     // the checkpoint folder made for a model whose config names none
  std::unique_ptr<Predictor> predictor_;
};

// The Model of an import's files, loaded.
std::unique_ptr<PyModel> ImportedPyModel(const ImportedModel& imp) {
  auto model = std::make_unique<PyModel>(imp.config, std::map<std::string, py::object>{});
  model->Load(imp.checkpoint);
  return model;
}

}  // namespace
}  // namespace frugal

PYBIND11_MODULE(_frugal, m) {
  using frugal::PyModel;
  m.doc() = "frugal: train deep nets with sublinear memory (docs/guide/python.md)";
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    FLAGS_colorlogtostderr = false;
    google::InitGoogleLogging("frugal");
  }
  py::register_exception<frugal::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<PyModel>(m, "Model", "The model of a frugal config (.prototxt), with its defines.")
      .def(py::init<const std::string&, const std::map<std::string, py::object>&>(), py::arg("config"),
           py::arg("defines") = std::map<std::string, py::object>{})
      .def("plan", &PyModel::Plan, py::arg("memory") = "",
           "The memory plan under a strategy ('sqrt', 'budget=60MiB', 'limit=2GiB'; the config's when empty): "
           "the dict `frugal plan --json` prints.")
      .def("train", &PyModel::Train, py::arg("epochs") = py::none(), py::arg("max_iters") = py::none(),
           py::arg("lr") = py::none(), py::arg("checkpoint_dir") = "",
           py::arg("callbacks") = std::vector<py::function>{}, py::arg("log_json") = "", py::arg("quiet") = false,
           py::arg("data") = py::none(), py::arg("val_data") = py::none(),
           "Trains as `frugal train` does; continues from the model's checkpoint if it has one. data=(x, y) "
           "and val_data=(x, y): numpy samples and labels instead of the config's data, or an iterable of such "
           "(x, y) batches with len() (a list, a DataLoader), walked again each epoch. Each callback gets each "
           "event as a dict (event: window, validation or epoch; the --log-json line's fields); one returning "
           "True stops the run after the batch under way. Returns the last validation (or training) accuracy.")
      .def("timeline", &PyModel::Timeline, py::arg("memory") = "", py::arg("points") = 800,
           "The live bytes of a training step by kind (forward, recomputed, gradients, workspace) at up to "
           "`points` steps, and the peak, under a strategy: frugal plan --timeline's data.")
      .def("load", &PyModel::Load, py::arg("checkpoint"),
           "Takes the parameters of a checkpoint (a .frugal file, or a folder's latest).")
      .def("save", &PyModel::Save, py::arg("path"), "Writes a copy of the model's checkpoint.")
      .def("predict", &PyModel::Predict, py::arg("x"),
           "The outputs for samples x of shape (N, *data.sample_shape): an array, or a dict by output name.")
      .def_property_readonly("outputs", &PyModel::Outputs, "The names of the graph's outputs.")
      .def_property_readonly("checkpoint", &PyModel::checkpoint, "The checkpoint trained or loaded ('' if none).")
      .def_property_readonly("config", &PyModel::config, "The config's path.");

  m.def(
      "import_onnx",
      [](const std::string& path, const std::string& prefix, int64_t batch, bool allow_nonfinite) {
        frugal::OnnxImportOptions opts;
        opts.batch = batch;
        opts.allow_nonfinite = allow_nonfinite;
        return frugal::ImportedPyModel(frugal::ImportOnnxModel(path, prefix, opts));
      },
      py::arg("path"), py::arg("prefix"), py::arg("batch") = 1, py::arg("allow_nonfinite") = false,
      "frugal import-onnx: writes PREFIX.prototxt and PREFIX.frugal and returns their Model, loaded.");
  m.def(
      "import_mxnet",
      [](const std::string& symbol, const std::string& params, const std::string& prefix,
         const std::vector<int64_t>& data_shape, bool allow_nonfinite) {
        frugal::MxnetImportOptions opts;
        opts.data_shape = data_shape;
        opts.allow_nonfinite = allow_nonfinite;
        return frugal::ImportedPyModel(frugal::ImportMxnetModel(symbol, params, prefix, opts));
      },
      py::arg("symbol"), py::arg("params"), py::arg("prefix"), py::arg("data_shape") = std::vector<int64_t>{},
      py::arg("allow_nonfinite") = false,
      "frugal import-mxnet: writes PREFIX.prototxt and PREFIX.frugal from MXNet's symbol JSON and .params (data_shape: "
      "the batch and a sample's dims, where the symbol gives none) and returns their Model, loaded.");
  m.def(
      "read_mxnet_params",
      [](const std::string& path) {
        py::dict out;
        for (const auto& [name, t] : frugal::ReadMxnetParams(path)) {  // float32 whatever the file's type
          py::array_t<float> a(t.shape().dims());
          std::copy_n(t.f(), t.size(), a.mutable_data());
          out[py::str(name)] = a;
        }
        return out;
      },
      py::arg("path"), "The arrays of an MXNet .params file by name (\"arg:...\", \"aux:...\"), as float32 arrays.");
  m.def(
      "export_onnx",
      [](const PyModel& model, const std::string& path) {
        frugal::WriteOnnxModel(frugal::ExportOnnx(model.cfg(), model.Trained("export_onnx(" + path + ")")), path);
      },
      py::arg("model"), py::arg("path"), "Writes the model with its checkpoint's parameters as an ONNX file.");
}
