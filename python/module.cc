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
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/onnx.h"
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
    const MemoryStrategy s = memory.empty() ? ConfigStrategy(cfg_) : ParseMemoryStrategy(memory);
    DataSources data;
    if (s.limit()) data = OpenDataSources(cfg_);  // a limit bounds the process, which holds the data
    return JsonDict(ModelPlanJson(BuildModel(cfg_, s), s));
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
               const std::string& log_json, bool quiet) {
    ConfigFile cfg = cfg_;
    config::Solver& sc = *cfg.net.mutable_solver();
    if (epochs) sc.set_epochs(*epochs);
    if (max_iters) sc.set_max_iters(*max_iters);
    if (lr) sc.set_lr(static_cast<float>(*lr));
    if (!checkpoint_dir.empty()) sc.set_checkpoint_dir(checkpoint_dir);
    if (sc.checkpoint_dir().empty()) sc.set_checkpoint_dir(OwnDir());
    TrainOptions opts;
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
    FRUGAL_REQUIRE(!checkpoint_.empty(), "Model.save(", path,
                   "): nothing to save: the model has not been trained or loaded (train() or load() first)");
    std::error_code ec;
    fs::copy_file(checkpoint_, path, fs::copy_options::overwrite_existing, ec);
    FRUGAL_REQUIRE(!ec, "Model.save(", path, "): cannot write it (", ec.message(), ")");
  }

  // The graph's outputs for the samples x, (N, *sample_shape) (cast to
  // float32): an array (N, *output shape) for a model of one output, else a
  // dict of them by output name.
  py::object Predict(const py::array& x) {
    Predictor& p = Loaded();
    const Shape& sample = p.sample_shape();
    py::array_t<float, py::array::c_style | py::array::forcecast> in(x);
    std::vector<int64_t> want{-1};
    want.insert(want.end(), sample.dims().begin(), sample.dims().end());
    bool fits = in.ndim() == static_cast<py::ssize_t>(want.size()) && in.ndim() >= 1 && in.shape(0) > 0;
    for (py::ssize_t k = 1; fits && k < in.ndim(); ++k) fits = in.shape(k) == want[k];
    auto dims = [](py::ssize_t n, auto dim) {
      std::string s;
      for (py::ssize_t k = 0; k < n; ++k) s += (k ? ", " : "") + dim(k);
      return s;
    };
    FRUGAL_REQUIRE(fits, "Model.predict: samples of shape (",
                   dims(in.ndim(), [&](py::ssize_t k) { return std::to_string(in.shape(k)); }), ") for ", cfg_.path,
                   "; it takes (",
                   dims(want.size(), [&](py::ssize_t k) { return k ? std::to_string(want[k]) : std::string("N"); }),
                   ") with N >= 1 (data.sample_shape)");
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

 private:
  Predictor& Loaded() {
    FRUGAL_REQUIRE(!checkpoint_.empty(), cfg_.path,
                   ": the model has no parameters yet: train() it or load() a checkpoint first");
    if (!predictor_) predictor_ = std::make_unique<Predictor>(cfg_, checkpoint_);
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
           "Trains as `frugal train` does; continues from the model's checkpoint if it has one. Each callback "
           "gets each event as a dict (event: window, validation or epoch; the --log-json line's fields); one "
           "returning True stops the run after the batch. Returns the last validation (or training) accuracy.")
      .def("load", &PyModel::Load, py::arg("checkpoint"),
           "Takes the parameters of a checkpoint (a .frugal file, or a folder's latest).")
      .def("save", &PyModel::Save, py::arg("path"), "Writes a copy of the model's checkpoint.")
      .def("predict", &PyModel::Predict, py::arg("x"),
           "The outputs for samples x of shape (N, *data.sample_shape): an array, or a dict by output name.")
      .def_property_readonly("outputs", &PyModel::Outputs, "The names of the graph's outputs.")
      .def_property_readonly("checkpoint", &PyModel::checkpoint, "The checkpoint trained or loaded ('' if none).")
      .def_property_readonly("config", &PyModel::config, "The config's path.");

  m.def(
      "export_onnx",
      [](const PyModel& model, const std::string& path) {
        FRUGAL_REQUIRE(!model.checkpoint().empty(), "export_onnx(", path,
                       "): the model has no parameters yet: train() it or load() a checkpoint first");
        frugal::WriteOnnxModel(frugal::ExportOnnx(model.cfg(), model.checkpoint()), path);
      },
      py::arg("model"), py::arg("path"), "Writes the model with its checkpoint's parameters as an ONNX file.");
}
