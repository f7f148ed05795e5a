#include "ops/op_util.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "ops/cpu/vec.h"

namespace frugal {

void InferAsForwardInputs(ShapeCtx& c) {
  for (size_t i = 0; i < c.out.size(); ++i) c.out[i] = (*c.fwd_in)[i];
}

OpDef& AddBackward(OpRegistry* r, OpDef& fwd, std::vector<BackwardRead> reads, const std::string& doc) {
  std::vector<InputSpec> in;
  for (const BackwardRead& read : reads) {
    const std::string& what =
        read.kind == BackwardRead::kInput ? fwd.inputs().at(read.index).name : fwd.outputs().at(read.index);
    in.push_back({read.kind == BackwardRead::kOutGrad ? "d" + what : what});
  }
  std::vector<std::string> out;
  for (const InputSpec& s : fwd.inputs()) out.push_back("d" + s.name);
  const OpDef* f = &fwd;
  auto num_reads = [f, reads](const std::any& p) {
    const int n = f->NumInputs(p);
    return static_cast<int>(std::count_if(reads.begin(), reads.end(), [n](const BackwardRead& read) {
      return read.kind != BackwardRead::kInput || read.index < n;
    }));
  };
  const std::string name = "_backward_" + fwd.name();
  fwd.Backward(std::move(reads), name);
  return r->Add(name)
      .Doc("Gradient of " + fwd.name() + ": " + doc)
      .Inputs(std::move(in))
      .Outputs(std::move(out))
      .NumInputsFn(num_reads)
      .NumOutputsFn([f](const std::any& p) { return f->NumInputs(p); })
      .InferShape(InferAsForwardInputs)
      .NoGradient()
      .Recompute(fwd.cost())
      .Random(fwd.randomness());
}

namespace {

// y += x elementwise, T = float or uint16_t (bfloat16 bits).
template <typename T>
void AddInto(const Tensor& x, const Tensor& y) {
  const T* from = Elems<T>(x);
  T* to = Elems<T>(y);
  ForEachRange(x.size(), [&](int64_t b, int64_t e) {
    const T* xb = from + b;
    cpu::Vec().act<T>().add_n(&xb, 1, to + b, e - b, /*add=*/true);
  });
}

}  // namespace

void CopyInto(const Tensor& x, const Tensor& y, OpReq req) {
  if (req == OpReq::kNull) return;
  CHECK(x.dtype() == y.dtype() && x.size() == y.size())
      << DTypeName(x.dtype()) << " " << x.shape() << " into " << DTypeName(y.dtype()) << " " << y.shape();
  if (req == OpReq::kAdd) {
    // Elems fails loudly on dtypes other than float32 and bfloat16.
    return x.dtype() == DType::kBFloat16 ? AddInto<uint16_t>(x, y) : AddInto<float>(x, y);
  }
  if (x.raw() == y.raw()) return;  // in place
  const int64_t width = DTypeBytes(x.dtype());
  const char* from = x.data<char>();
  char* to = y.data<char>();
  ForEachRange(x.size(), [&](int64_t b, int64_t e) { std::memcpy(to + b * width, from + b * width, (e - b) * width); });
}

std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.ndim());
  int64_t step = 1;
  for (int d = s.ndim() - 1; d >= 0; --d) {
    st[d] = step;
    step *= s[d];
  }
  return st;
}

StridedIndex::StridedIndex(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  for (size_t d = 0; d < dims.size(); ++d) {
    size_ *= dims[d];
    if (dims[d] == 1) continue;
    // Merge with the previous dim when stepping through both is one even walk.
    if (!dims_.empty() && strides_.back() == strides[d] * dims[d]) {
      dims_.back() *= dims[d];
      strides_.back() = strides[d];
      continue;
    }
    dims_.push_back(dims[d]);
    strides_.push_back(strides[d]);
  }
}

bool BroadcastShape(const Shape& a, const Shape& b, Shape* y) {
  const int n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(n);
  for (int d = 0; d < n; ++d) {
    const int da = d - (n - a.ndim()), db = d - (n - b.ndim());
    const int64_t x = da >= 0 ? a[da] : 1, z = db >= 0 ? b[db] : 1;
    if (x != z && x != 1 && z != 1) return false;
    dims[d] = x == 1 ? z : x;
  }
  *y = Shape(dims);
  return true;
}

StridedIndex BroadcastIndex(const Shape& x, const Shape& y) {
  const std::vector<int64_t> xs = Strides(x);
  std::vector<int64_t> strides(y.ndim(), 0);
  for (int d = 0; d < x.ndim(); ++d) {
    const int dy = d + y.ndim() - x.ndim();
    strides[dy] = x[d] == 1 ? 0 : xs[d];
  }
  return StridedIndex(y.dims(), strides);
}

Reduction MakeReduction(const Shape& x, const std::vector<bool>& fold) {
  const std::vector<int64_t> xs = Strides(x);
  std::vector<int64_t> kd, ks, fd, fs;
  for (int d = 0; d < x.ndim(); ++d) {
    (fold[d] ? fd : kd).push_back(x[d]);
    (fold[d] ? fs : ks).push_back(xs[d]);
  }
  return {StridedIndex(kd, ks), StridedIndex(fd, fs)};
}

Reduction BroadcastReduction(const Shape& x, const Shape& y) {
  std::vector<bool> fold(y.ndim());
  for (int d = 0; d < y.ndim(); ++d) {
    const int dx = d - (y.ndim() - x.ndim());
    fold[d] = dx < 0 || x[dx] == 1;
  }
  return MakeReduction(y, fold);
}

int NormalizeAxis(const ShapeCtx& c, int64_t axis, int ndim, const char* what) {
  if (axis < -ndim || axis >= ndim) {
    c.Fail(Fmt(what, " ", axis, " is out of range for ", ndim, " dims (use ", -ndim, "..", ndim - 1, ")"));
  }
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

}  // namespace frugal
