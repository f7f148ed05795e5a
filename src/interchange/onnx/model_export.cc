// ONNX export of a trained config: its graph (exporter.cc's ExportOnnx at
// data.batch_size, the checkpoint's values), a batch axis, and what the
// data pipeline does to an input as metadata.
// The batch axis: the model is exported at data.batch_size and again at one
// more; the dims that differ are the batch's (dim_param "batch", or
// "batch*K" for K rows per sample), a Reshape's shape that differs in one
// place gets -1 there; anything else that differs keeps the batch fixed,
// and the model's metadata says why (frugal.batch_axis).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/io.h"
#include "frugal/onnx.h"
#include "frugal/optimizer.h"
#include "frugal/passes/shapes.h"
#include "frugal/trace.h"
#include "frugal.pb.h"
#include "onnx.pb.h"

namespace frugal {
// Named: a unity build compiles the interchange folder's files together.
namespace onnx_model_export {
namespace {

// The shapes of the config's data inputs at this batch size.
std::vector<std::pair<std::string, Shape>> InputShapes(const ConfigFile& cfg, const Graph& g, int64_t batch) {
  const config::Data& d = cfg.net.data();
  std::vector<int64_t> data{batch}, label{batch};
  data.insert(data.end(), d.sample_shape().begin(), d.sample_shape().end());
  label.insert(label.end(), d.label_shape().begin(), d.label_shape().end());
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const Node& n : g.nodes())
    if (n.var == VarKind::kInput) shapes.push_back({n.name, Shape(n.name == d.label_name() ? label : data)});
  return shapes;
}

// Gives a (the model at batch n) a batch axis where b (at n + 1) differs
// from it only there: the inputs' and outputs' dims that differ get the
// dim_param "batch" (or "batch*K": K rows per sample), a Reshape's shape
// that differs in one place gets -1 there. Returns "" when done, else why
// the batch stays fixed (a is then unchanged).
std::string MakeBatchDynamic(onnx::GraphProto* a, const onnx::GraphProto& b, int64_t n) {
  if (a->node_size() != b.node_size() || a->initializer_size() != b.initializer_size())
    return Fmt("the model at batch ", n + 1, " has other nodes");
  std::set<std::string> reshape_shapes;
  for (int k = 0; k < a->node_size(); ++k) {
    const onnx::NodeProto& node = a->node(k);
    if (node.SerializeAsString() != b.node(k).SerializeAsString())
      return Fmt("ONNX node '", node.name(), "' is another at batch ", n + 1);
    if (node.op_type() == "Reshape") reshape_shapes.insert(node.input(1));
  }
  std::vector<std::pair<onnx::TensorProto*, int>> minus_one;  // (shape, where)
  for (int k = 0; k < a->initializer_size(); ++k) {
    onnx::TensorProto* t = a->mutable_initializer(k);
    const onnx::TensorProto& u = b.initializer(k);
    if (t->SerializeAsString() == u.SerializeAsString()) continue;
    std::vector<int> at;
    if (reshape_shapes.count(t->name()) && t->int64_data_size() == u.int64_data_size())
      for (int i = 0; i < t->int64_data_size(); ++i)
        if (t->int64_data(i) != u.int64_data(i)) at.push_back(i);
    if (at.size() != 1) return Fmt("initializer '", t->name(), "' depends on the batch size");
    minus_one.push_back({t, at[0]});
  }
  std::vector<std::pair<onnx::TensorShapeProto::Dimension*, std::string>> symbolic;
  auto dims = [&](onnx::ValueInfoProto* v, const onnx::ValueInfoProto& w) {
    auto* da = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    const auto& db = w.type().tensor_type().shape();
    for (int i = 0; i < da->dim_size(); ++i) {
      const int64_t x = da->dim(i).dim_value(), y = db.dim(i).dim_value();
      if (x == y) continue;
      if (x % n != 0 || y != x / n * (n + 1))
        return Fmt("'", v->name(), "' has dim ", i, " = ", x, " at batch ", n, " but ", y, " at batch ", n + 1);
      symbolic.push_back({da->mutable_dim(i), x == n ? std::string("batch") : Fmt("batch*", x / n)});
    }
    return std::string();
  };
  for (int k = 0; k < a->input_size(); ++k)
    if (std::string why = dims(a->mutable_input(k), b.input(k)); !why.empty()) return why;
  for (int k = 0; k < a->output_size(); ++k)
    if (std::string why = dims(a->mutable_output(k), b.output(k)); !why.empty()) return why;
  for (auto& [t, i] : minus_one) t->set_int64_data(i, -1);
  for (auto& [d, name] : symbolic) d->set_dim_param(name);
  return "";
}

void AddMetadata(onnx::ModelProto* m, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* p = m->add_metadata_props();
  p->set_key(key), p->set_value(value);
}

template <typename List>
std::string Floats(const List& v) {
  std::string s;
  for (float x : v) s += (s.empty() ? "" : ",") + ExactAttr(x);
  return s;
}

// The text source's vocabulary as JSON, id by id: a word (<unk> first), or
// at the char level the byte (null for <unk>). Throws Error naming the file.
std::string VocabularyJson(const config::TextSource& t) {
  const bool words = t.level() == config::TextSource::WORD;
  const Vocabulary v = BuildVocabulary(ReadTextFile(t.vocab_path().empty() ? t.path() : t.vocab_path()),
                                       words ? TextLevel::kWord : TextLevel::kChar);
  std::string s;
  for (int64_t id = 0; id < v.size(); ++id) {
    const std::string& token = v.tokens[id];
    s += id ? "," : "[";
    s += words ? JsonString(token) : id == 0 ? "null" : std::to_string(static_cast<unsigned char>(token[0]));
  }
  return s + "]";
}

// What the config's data pipeline does to an input before the graph reads
// it, from the validation source (else the training one), as metadata
// "frugal.data.*" (docs/onnx.md lists the keys); notes say what is left out.
void AddPreprocessing(const config::Data& d, onnx::ModelProto* m, std::vector<std::string>* notes) {
  auto put = [m](const std::string& key, const std::string& value) { AddMetadata(m, "frugal.data." + key, value); };
  put("input", d.data_name());
  auto image = [&](const std::string& source, float scale, const config::Augment& a) {
    put("source", source);
    put("scale", ExactAttr(scale));
    if (a.resize()) put("resize", std::to_string(a.resize()));
    if (a.pad()) put("pad", std::to_string(a.pad()));
    put("crop", a.rand_resized_crop() ? "random_resized" : a.rand_crop() ? "random" : "centre");
    if (a.mean_size()) put("mean", Floats(a.mean()));
    if (a.std_size()) put("std", Floats(a.std()));
  };
  const config::DataSource& s = d.has_val() ? d.val() : d.train();
  switch (s.source_case()) {
    case config::DataSource::kIdx:
      put("source", "idx");
      put("scale", ExactAttr(1.f / 255.f));  // LoadIdxDataset's
      break;
    case config::DataSource::kCifar: image("cifar", s.cifar().scale(), s.cifar().augment()); break;
    case config::DataSource::kRecordio: image("recordio", s.recordio().scale(), s.recordio().augment()); break;
    case config::DataSource::kText:
      put("source", "text");
      put("text.level", s.text().level() == config::TextSource::WORD ? "word" : "char");
      try {
        put("text.vocabulary", VocabularyJson(s.text()));
      } catch (const Error& e) { notes->push_back(Fmt("no vocabulary in the metadata: ", e.what())); }
      break;
    case config::DataSource::kSynthetic: put("source", "synthetic"); break;
    case config::DataSource::SOURCE_NOT_SET: break;
  }
}

// The checkpoint's value of every parameter and aux variable of g; Error
// naming the file where they do not match the graph's names and shapes.
std::map<std::string, Tensor> CheckpointValues(const Graph& g, const std::string& path) {
  const CheckpointState c = LoadCheckpoint(path);
  std::map<std::string, Tensor> params, aux;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.var == VarKind::kParam || n.var == VarKind::kAux)
      (n.var == VarKind::kParam ? params : aux)[n.name] = Tensor::Empty(g.shape(Entry{i, 0}));
  }
  RestoreTensors(c.params, params, "parameters", path);
  RestoreTensors(c.aux, aux, "aux state", path);
  params.merge(aux);
  return params;
}

}  // namespace
}  // namespace onnx_model_export

onnx::ModelProto ExportOnnx(const ConfigFile& given, const std::string& checkpoint, std::vector<std::string>* notes) {
  using namespace onnx_model_export;  // NOLINT(google-build-using-namespace)
  ConfigFile cfg = given;
  cfg.net.set_dtype("float32");  // bfloat16 activations are a training choice; the weights are float32
  const int64_t n = cfg.net.data().batch_size();
  Graph g = BuildGraph(cfg);
  InferShapes(&g, InputShapes(cfg, g, n));
  const std::map<std::string, Tensor> values = CheckpointValues(g, checkpoint);
  onnx::ModelProto m = ExportOnnx(g, values, cfg.net.name());
  std::string fixed;
  try {
    Graph more = BuildGraph(cfg);
    InferShapes(&more, InputShapes(cfg, more, n + 1));
    fixed = MakeBatchDynamic(m.mutable_graph(), ExportOnnx(more, values, cfg.net.name()).graph(), n);
  } catch (const Error& e) {
    fixed = e.what();  // the graph does not build at another batch size: a shape in the config holds it
  }
  AddMetadata(&m, "frugal.batch_axis", fixed.empty() ? "dynamic" : Fmt("fixed at ", n, ": ", fixed));
  std::vector<std::string> ignored;
  AddPreprocessing(cfg.net.data(), &m, notes ? notes : &ignored);
  if (notes && !fixed.empty()) notes->push_back(Fmt("the batch size is fixed at ", n, ": ", fixed));
  return m;
}

void WriteOnnxModel(const onnx::ModelProto& m, const std::string& path) {
  std::string bytes;
  FRUGAL_REQUIRE(m.SerializeToString(&bytes), path, ": the ONNX model does not serialise (over 2 GiB?)");
  WriteFileAtomic(path, bytes);
}

}  // namespace frugal
