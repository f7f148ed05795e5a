// Metrics on small hand-made batches: values, num_valid, names, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/metrics.h"

namespace frugal {
namespace {

Tensor Make(Shape shape, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(shape);
  for (size_t i = 0; i < v.size(); ++i) t.f()[i] = v[i];
  return t;
}

// Four rows of three class probabilities; the last row is padding (num_valid 3).
Tensor Prob() {
  return Make(Shape{4, 3}, {0.7f, 0.2f, 0.1f,  // label 0: top-1
                            0.3f, 0.5f, 0.2f,  // label 0: second
                            0.1f, 0.3f, 0.6f,  // label 0: third
                            0.0f, 1.0f, 0.0f});
}
Tensor Label() { return Make(Shape{4}, {0, 0, 0, 2}); }

double Value(const std::string& name, int64_t valid = 3) {
  auto m = MakeMetric(name);
  m->Update(Prob(), Label(), valid);
  return m->Get();
}

TEST(Metrics, ClassificationValues) {
  EXPECT_DOUBLE_EQ(Value("accuracy"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(Value("top_k_accuracy_2"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(Value("top_k_accuracy_3"), 1.0);
  const double ce = -(std::log(0.7f) + std::log(0.3f) + std::log(0.1f)) / 3;
  EXPECT_NEAR(Value("cross_entropy"), ce, 1e-6);
  EXPECT_NEAR(Value("perplexity"), std::exp(ce), 1e-5);
  // The padding row (p[label] = 0) would count as 1e-12 if num_valid were ignored.
  EXPECT_GT(Value("cross_entropy", 4), 5.0);
}

TEST(Metrics, TiesGoToTheLowerClass) {
  // As argmax taking the first maximum: class 0 wins a tie with class 1.
  Tensor p = Make(Shape{2, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
  auto acc = MakeMetric("accuracy");
  acc->Update(p, Make(Shape{2}, {0, 0}), 2);
  EXPECT_DOUBLE_EQ(acc->Get(), 1.0);
  acc->Reset();
  acc->Update(p, Make(Shape{2}, {1, 1}), 2);
  EXPECT_DOUBLE_EQ(acc->Get(), 0.0);
}

TEST(Metrics, NaNPredictionsAreWrong) {
  // A broken model's NaN outputs: neither first by default nor a silent
  // cross-entropy; a NaN beside a finite label score outranks it too.
  const float nan = std::nanf("");
  Tensor p = Make(Shape{3, 3}, {nan, nan, nan,       // label 0
                                0.2f, nan, 0.1f,     // label 0: the NaN outranks it
                                0.1f, 0.8f, 0.1f});  // label 1: right
  Tensor y = Make(Shape{3}, {0, 0, 1});
  for (const char* name : {"accuracy", "top_k_accuracy_2"}) {
    auto m = MakeMetric(name);
    m->Update(p, y, 3);
    EXPECT_DOUBLE_EQ(m->Get(), std::string(name) == "accuracy" ? 1.0 / 3 : 2.0 / 3) << name;
  }
  auto ce = MakeMetric("cross_entropy");
  ce->Update(p, y, 3);
  EXPECT_TRUE(std::isnan(ce->Get()));
}

TEST(Metrics, MeanSquaredError) {
  Tensor out = Make(Shape{3, 2}, {1, 2, 3, 4, 100, 100});
  Tensor y = Make(Shape{3, 2}, {1, 0, 0, 4, 0, 0});
  auto mse = MakeMetric("mse");
  mse->Update(out, y, 2);  // the third row is padding
  EXPECT_DOUBLE_EQ(mse->Get(), (4.0 + 9.0) / 4);
  EXPECT_EQ(mse->count(), 2);
  mse->Reset();
  EXPECT_EQ(mse->Get(), 0);
}

TEST(Metrics, SetAccumulatesOverBatchesAndPrints) {
  MetricSet set;  // accuracy, cross_entropy
  set.Update(Prob(), Label(), 1);
  set.Update(Prob(), Label(), 2);
  EXPECT_EQ(set.count(), 3);
  EXPECT_DOUBLE_EQ(set.Get("accuracy"), 2.0 / 3);  // rows 0, 0, 1
  std::string s = set.ToString("Validation-");
  EXPECT_EQ(s.rfind("Validation-accuracy=0.666667 Validation-cross_entropy=", 0), 0u) << s;
  MetricSet custom({"top_k_accuracy_2", "perplexity", "mse"});
  EXPECT_TRUE(custom.Has("mse"));
  EXPECT_THROW(custom.Get("accuracy"), Error);
  EXPECT_EQ(custom.Values().size(), 3u);
  EXPECT_EQ(custom.Values()[0].first, "top_k_accuracy_2");
}

TEST(Metrics, BadNamesAndLabelsAreErrors) {
  try {
    MakeMetric("acc");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown metric 'acc' (known: accuracy, top_k_accuracy_K"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MakeMetric("top_k_accuracy_0"), Error);
  EXPECT_THROW(MakeMetric("top_k_accuracy_x"), Error);
  EXPECT_THROW(MetricSet({"mse", "mse"}), Error);
  auto acc = MakeMetric("accuracy");
  try {
    acc->Update(Prob(), Make(Shape{4}, {0, 3, 0, 0}), 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 of row 1 is not a class index in [0, 3)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MakeMetric("mse")->Update(Prob(), Label(), 3), Error);
}

// Two outputs (a loss per step) against labels (N, 2): output k is scored
// against column k, every row of every output counting once.
TEST(Metrics, EveryOutputAgainstItsLabelColumn) {
  Tensor step0 = Make(Shape{3, 2}, {0.9f, 0.1f, 0.2f, 0.8f, 0.6f, 0.4f});
  Tensor step1 = Make(Shape{3, 2}, {0.3f, 0.7f, 0.7f, 0.3f, 0.5f, 0.5f});
  // Row i: (label of step 0, label of step 1); the third row is padding.
  Tensor labels = Make(Shape{3, 2}, {0, 1, 1, 1, 0, 0});
  MetricSet set({"accuracy", "cross_entropy", "perplexity"});
  set.Update({step0, step1}, labels, 2);
  EXPECT_EQ(set.count(), 4);
  EXPECT_DOUBLE_EQ(set.Get("accuracy"), 3.0 / 4);  // step 1, row 1 is wrong
  const double ce = -(std::log(0.9f) + std::log(0.8f) + std::log(0.7f) + std::log(0.3f)) / 4;
  EXPECT_NEAR(set.Get("cross_entropy"), ce, 1e-6);
  EXPECT_NEAR(set.Get("perplexity"), std::exp(ce), 1e-5);
  // One output is scored as before.
  MetricSet one;
  one.Update(std::vector<Prediction>{Prob()}, Label(), 3);
  EXPECT_DOUBLE_EQ(one.Get("accuracy"), 1.0 / 3);
}

// One output with a prediction per label (a language model's (N T, V) rows
// against labels (N, T)): every position of every valid sample is scored,
// not only the first num_valid rows.
TEST(Metrics, APredictionPerPositionScoresEveryPosition) {
  // Two samples of 3 positions (the second is padding), 2 classes.
  Tensor prob = Make(Shape{6, 2}, {0.9f, 0.1f, 0.2f, 0.8f, 0.4f, 0.6f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f});
  Tensor labels = Make(Shape{2, 3}, {0, 1, 0, 1, 1, 1});
  MetricSet set({"accuracy", "cross_entropy"});
  set.Update(std::vector<Prediction>{prob}, labels, 1);
  EXPECT_EQ(set.count(), 3);
  EXPECT_DOUBLE_EQ(set.Get("accuracy"), 2.0 / 3);  // position 2 predicts class 1
  EXPECT_NEAR(set.Get("cross_entropy"), -(std::log(0.9f) + std::log(0.8f) + std::log(0.4f)) / 3, 1e-6);
}

// Outputs of (N c, C) rows, one per run of c positions (a language model's
// head per run of steps): output k against label columns k c .. k c + c - 1,
// the rows sample by sample; scored as c outputs per run would be.
TEST(Metrics, EveryOutputAgainstItsRunOfLabelColumns) {
  // Two samples (the second padding) of 4 positions in two runs of 2; 2 classes.
  const std::vector<float> p = {
      0.9f, 0.1f, 0.2f, 0.8f, 0.4f, 0.6f, 0.5f, 0.5f,   // run 0: sample 0's positions 0, 1; padding
      0.3f, 0.7f, 0.6f, 0.4f, 0.5f, 0.5f, 0.5f, 0.5f};  // run 1: positions 2, 3; padding
  Tensor run0 = Make(Shape{4, 2}, std::vector<float>(p.begin(), p.begin() + 8));
  Tensor run1 = Make(Shape{4, 2}, std::vector<float>(p.begin() + 8, p.end()));
  Tensor labels = Make(Shape{2, 4}, {0, 1, 0, 0, 1, 1, 1, 1});
  MetricSet runs({"accuracy", "cross_entropy"});
  runs.Update({run0, run1}, labels, 1);
  // The same predictions as one output per position.
  MetricSet steps({"accuracy", "cross_entropy"});
  std::vector<Prediction> per_step;
  for (int t = 0; t < 4; ++t) {
    const float* row = p.data() + (t / 2) * 8 + (t % 2) * 2;
    per_step.push_back(Make(Shape{2, 2}, {row[0], row[1], 0.5f, 0.5f}));
  }
  steps.Update(per_step, labels, 1);
  EXPECT_EQ(runs.count(), 4);
  EXPECT_EQ(steps.count(), 4);
  EXPECT_DOUBLE_EQ(runs.Get("accuracy"), 3.0 / 4);  // position 3 predicts class 0
  EXPECT_DOUBLE_EQ(runs.Get("accuracy"), steps.Get("accuracy"));
  EXPECT_NEAR(runs.Get("cross_entropy"), steps.Get("cross_entropy"), 1e-12);
}

TEST(Metrics, LabelsThatDoNotMatchTheOutputsAreErrors) {
  Tensor p = Make(Shape{2, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
  MetricSet set;
  try {  // three outputs, two labels per row
    set.Update({p, p, p}, Make(Shape{2, 2}, {0, 1, 1, 0}), 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the graph has 3 outputs but the labels (2,2) hold 2 values per row"),
              std::string::npos)
        << e.what();
  }
  try {  // one output of 2 rows, labels of a sequence per row
    set.Update(p, Make(Shape{2, 2}, {0, 1, 1, 0}), 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one class index per row is expected"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace frugal
