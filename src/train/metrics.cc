// Metrics (definitions in frugal/metrics.h).
#include "frugal/metrics.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace frugal {
namespace {

constexpr const char* kKnown = "accuracy, top_k_accuracy_K (e.g. top_k_accuracy_5), cross_entropy, perplexity, mse";

// The class index in label row i, checked against k classes.
int64_t ClassOf(const std::string& metric, const float* y, int64_t i, int64_t k) {
  float v = y[i];
  int64_t c = static_cast<int64_t>(v);
  FRUGAL_REQUIRE(v >= 0 && static_cast<float>(c) == v && c < k, "metric ", metric, ": label ", v, " of row ", i,
                 " is not a class index in [0, ", k, ") (do the labels match the number of outputs?)");
  return c;
}

int64_t Classes(const Tensor& outputs) { return outputs.shape().ndim() > 1 ? outputs.size() / outputs.shape()[0] : 1; }

// One class index per output row: labels of another size would be read out of
// step with the rows (the labels of a per-step loss belong to several outputs).
// Returns the rows to score: a batch of N samples with labels (N, T) and a
// prediction per label (a language model's N T rows, sample by sample)
// scores T rows per valid sample.
int64_t ValidRows(const std::string& metric, const Tensor& out, const Tensor& label, int64_t num_valid) {
  const int64_t rows = out.shape().ndim() ? out.shape()[0] : 1;
  FRUGAL_REQUIRE(label.size() == rows, "metric ", metric, ": outputs ", out.shape(), " have ", rows,
                 " rows but the labels ", label.shape(), " hold ", label.size(),
                 " values; one class index per row is expected (with a loss per step, make every step's"
                 " prediction a graph output, in step order)");
  const int64_t samples = label.shape().ndim() ? label.shape()[0] : 1;
  return num_valid * (rows / samples);
}

// Rows ranked above the label: larger outputs, or equal ones at a lower index.
// A NaN output ranks above every number, so a NaN at the label ranks last:
// a model that predicts NaN is wrong, not first by default.
int64_t RankOfLabel(const float* p, int64_t k, int64_t truth) {
  if (std::isnan(p[truth])) return k;
  int64_t rank = 0;
  for (int64_t j = 0; j < k; ++j) rank += p[j] > p[truth] || std::isnan(p[j]) || (p[j] == p[truth] && j < truth);
  return rank;
}

// A metric that scores the output rows one by one against their class
// labels and averages: a row is either the class scores (OutputKind::kValues)
// or its loss and the label's rank (kLossAndRank, linear_cross_entropy).
class RowMetric : public Metric {
 public:
  void Reset() override {
    n_ = 0;
    sum_ = 0;
  }
  void Update(const Prediction& pred, const Tensor& label, int64_t num_valid) override {
    const Tensor& out = pred.values;
    const int64_t valid = ValidRows(name(), out, label, num_valid);
    const int64_t k = Classes(out);
    for (int64_t i = 0; i < valid; ++i) {
      if (pred.kind == OutputKind::kLossAndRank) {
        sum_ += OfLossAndRank(out.f()[2 * i], out.f()[2 * i + 1]);
      } else {
        sum_ += OfScores(out.f() + i * k, k, ClassOf(name(), label.f(), i, k));
      }
    }
    n_ += valid;
  }
  int64_t count() const override { return n_; }

 protected:
  virtual double OfScores(const float* p, int64_t k, int64_t truth) const = 0;
  virtual double OfLossAndRank(float loss, float rank) const = 0;
  double Mean() const { return n_ ? sum_ / n_ : 0; }

 private:
  int64_t n_ = 0;
  double sum_ = 0;
};

class TopK : public RowMetric {
 public:
  explicit TopK(int64_t k) : k_(k) {}
  std::string name() const override { return k_ == 1 ? "accuracy" : Fmt("top_k_accuracy_", k_); }
  double Get() const override { return Mean(); }

 private:
  double OfScores(const float* p, int64_t k, int64_t truth) const override { return RankOfLabel(p, k, truth) < k_; }
  double OfLossAndRank(float, float rank) const override { return rank < k_; }
  int64_t k_;
};

// Probabilities below this count as this (a loss of at most 27.6 a row).
constexpr float kFloorP = 1e-12f;

class CrossEntropy : public RowMetric {
 public:
  explicit CrossEntropy(bool perplexity) : perplexity_(perplexity) {}
  std::string name() const override { return perplexity_ ? "perplexity" : "cross_entropy"; }
  double Get() const override { return perplexity_ ? std::exp(Mean()) : Mean(); }

 private:
  // In float, as the loss ops compute it.
  double OfScores(const float* p, int64_t, int64_t truth) const override {
    return -std::log(std::max(p[truth], kFloorP));
  }
  double OfLossAndRank(float loss, float) const override { return std::min(loss, -std::log(kFloorP)); }
  bool perplexity_;
};

class Mse : public Metric {
 public:
  std::string name() const override { return "mse"; }
  void Reset() override {
    n_ = values_ = 0;
    sum_ = 0;
  }
  void Update(const Prediction& pred, const Tensor& label, int64_t num_valid) override {
    const Tensor& out = pred.values;
    FRUGAL_REQUIRE(pred.kind == OutputKind::kValues,
                   "metric mse: the output holds each row's loss and rank"
                   " (linear_cross_entropy), not values to compare with the labels");
    const int64_t rows = out.shape().ndim() ? out.shape()[0] : 1;
    FRUGAL_REQUIRE(label.size() == out.size(), "metric mse: outputs ", out.shape(), " and labels ", label.shape(),
                   " do not have the same number of values");
    const int64_t d = out.size() / rows;
    for (int64_t i = 0; i < num_valid * d; ++i) {
      double e = static_cast<double>(out.f()[i]) - label.f()[i];
      sum_ += e * e;
    }
    n_ += num_valid;
    values_ += num_valid * d;
  }
  double Get() const override { return values_ ? sum_ / values_ : 0; }
  int64_t count() const override { return n_; }

 private:
  int64_t n_ = 0, values_ = 0;
  double sum_ = 0;
};

}  // namespace

std::unique_ptr<Metric> MakeMetric(const std::string& name) {
  if (name == "accuracy") return std::make_unique<TopK>(1);
  if (name == "cross_entropy") return std::make_unique<CrossEntropy>(false);
  if (name == "perplexity") return std::make_unique<CrossEntropy>(true);
  if (name == "mse") return std::make_unique<Mse>();
  const std::string top = "top_k_accuracy_";
  if (name.compare(0, top.size(), top) == 0) {
    const std::string digits = name.substr(top.size());
    char* end = nullptr;
    long k = std::strtol(digits.c_str(), &end, 10);
    FRUGAL_REQUIRE(!digits.empty() && *end == '\0' && k >= 1 && k <= 1000000, "metric '", name,
                   "': K must be a positive integer (e.g. top_k_accuracy_5)");
    return std::make_unique<TopK>(k);
  }
  throw Error(Fmt("unknown metric '", name, "' (known: ", kKnown, ")"));
}

MetricSet::MetricSet() : MetricSet(std::vector<std::string>{}) {}

MetricSet::MetricSet(const std::vector<std::string>& names) {
  if (names.empty()) {  // the default set
    for (const char* n : {"accuracy", "cross_entropy"}) m_.push_back(MakeMetric(n));
    return;
  }
  for (const std::string& n : names) {
    FRUGAL_REQUIRE(!Has(n), "metric '", n, "' is listed twice");
    m_.push_back(MakeMetric(n));
  }
}

void MetricSet::Reset() {
  for (auto& m : m_) m->Reset();
}

void MetricSet::Update(const Prediction& outputs, const Tensor& labels, int64_t num_valid) {
  for (auto& m : m_) m->Update(outputs, labels, num_valid);
}

void MetricSet::Update(const std::vector<Prediction>& outputs, const Tensor& labels, int64_t num_valid) {
  CHECK(!outputs.empty()) << "a graph without outputs";
  if (outputs.size() == 1) return Update(outputs[0], labels, num_valid);
  const int64_t k = static_cast<int64_t>(outputs.size());
  const int64_t n = labels.shape().ndim() ? labels.shape()[0] : 1;
  // Output j is scored against label columns [j c, (j + 1) c) of every
  // row, c = the label columns over k: one column per output (a loss per
  // step), or c per output whose rows are (row, column) pairs in that order
  // (a loss per run of c steps, its (batch, c, classes) logits reshaped).
  const int64_t columns = labels.size() / n, c = columns / k;
  FRUGAL_REQUIRE(columns % k == 0 && c > 0, "metrics: the graph has ", k, " outputs but the labels ", labels.shape(),
                 " hold ", columns,
                 " values per row; output k is scored against label column k (or columns k c to k c + c - 1), so"
                 " each row needs one label (or c) per output (data.label_shape: [",
                 k, "])");
  if (!column_.defined() || column_.shape() != Shape{n, c}) column_ = Tensor::Empty(Shape{n, c});
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < c; ++t) column_.f()[i * c + t] = labels.f()[i * columns + j * c + t];
    Update(outputs[j], column_, num_valid);
  }
}

bool MetricSet::Has(const std::string& name) const {
  for (const auto& m : m_)
    if (m->name() == name) return true;
  return false;
}

double MetricSet::Get(const std::string& name) const {
  for (const auto& m : m_)
    if (m->name() == name) return m->Get();
  throw Error(Fmt("metric '", name, "' is not among the metrics of this run"));
}

int64_t MetricSet::count() const { return m_.empty() ? 0 : m_[0]->count(); }

std::vector<std::pair<std::string, double>> MetricSet::Values() const {
  std::vector<std::pair<std::string, double>> v;
  for (const auto& m : m_) v.emplace_back(m->name(), m->Get());
  return v;
}

std::string MetricSet::ToString(const std::string& prefix) const {
  std::string s;
  char buf[64];
  for (const auto& m : m_) {
    std::snprintf(buf, sizeof(buf), "%.6f", m->Get());
    s += (s.empty() ? "" : " ") + prefix + m->name() + "=" + buf;
  }
  return s;
}

}  // namespace frugal
