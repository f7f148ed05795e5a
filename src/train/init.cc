// Initializers: the spec parser and the fills (formulas in frugal/init.h).
#include "frugal/init.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace frugal {
namespace {

const char* kForms =
    "forms: xavier([uniform|gaussian][,in|out|avg][,magnitude]), msra([in|out|avg]), uniform(scale), "
    "uniform(low,high), normal(sigma), normal(mean,sigma), constant(value), zero, one";

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool ParseNumber(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtod(s.c_str(), &end);
  return errno == 0 && *end == '\0' && std::isfinite(*v);
}

bool ParseFactor(const std::string& s, InitSpec::Factor* f) {
  if (s == "in")
    *f = InitSpec::Factor::kIn;
  else if (s == "out")
    *f = InitSpec::Factor::kOut;
  else if (s == "avg")
    *f = InitSpec::Factor::kAvg;
  else
    return false;
  return true;
}

const char* FactorName(InitSpec::Factor f) {
  return f == InitSpec::Factor::kIn ? "in" : f == InitSpec::Factor::kOut ? "out" : "avg";
}

// Splits "name(a, b)" into name and trimmed args; false if malformed.
bool SplitCall(const std::string& text, std::string* name, std::vector<std::string>* args, std::string* why) {
  std::string t = Trim(text);
  size_t open = t.find('(');
  if (open == std::string::npos) {
    *name = t;
    return true;
  }
  if (t.back() != ')') {
    *why = "missing ')'";
    return false;
  }
  *name = Trim(t.substr(0, open));
  std::string inner = t.substr(open + 1, t.size() - open - 2);
  if (Trim(inner).empty()) return true;
  size_t start = 0;
  for (;;) {
    size_t comma = inner.find(',', start);
    args->push_back(Trim(inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (args->back().empty()) {
      *why = "empty argument";
      return false;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// Xavier's arguments, each recognised by its form; false with *why on error.
bool ParseXavierArgs(const std::vector<std::string>& args, InitSpec* s, std::string* why) {
  bool rnd = false, factor = false, magnitude = false;
  for (const std::string& a : args) {
    if (a == "uniform" || a == "gaussian") {
      if (rnd) {
        *why = "the random type is given twice";
        return false;
      }
      s->rnd = a == "uniform" ? InitSpec::Rnd::kUniform : InitSpec::Rnd::kGaussian;
      rnd = true;
    } else if (ParseFactor(a, &s->factor)) {
      if (factor) {
        *why = "the factor type is given twice";
        return false;
      }
      factor = true;
    } else if (ParseNumber(a, &s->magnitude)) {
      if (magnitude) {
        *why = "the magnitude is given twice";
        return false;
      }
      if (s->magnitude <= 0 || s->magnitude > std::numeric_limits<float>::max()) {
        *why = "the magnitude must be positive and within float32's range (3.4e38)";
        return false;
      }
      magnitude = true;
    } else {
      *why = "'" + a + "' is not uniform, gaussian, in, out, avg or a number";
      return false;
    }
  }
  return true;
}

// Numeric arguments of uniform/normal/constant; false with *why on error.
bool ParseValues(const std::string& name, const std::vector<std::string>& args, InitSpec* s, std::string* why) {
  std::vector<double> v;
  for (const std::string& a : args) {
    double x;
    if (!ParseNumber(a, &x)) {
      *why = "'" + a + "' is not a finite number";
      return false;
    }
    if (std::fabs(x) > std::numeric_limits<float>::max()) {  // weights are float32
      *why = "'" + a + "' is beyond float32's range (3.4e38)";
      return false;
    }
    v.push_back(x);
  }
  if (name == "constant") {
    if (v.size() != 1) {
      *why = "constant takes one value";
      return false;
    }
    s->kind = InitSpec::Kind::kConstant;
    s->a = v[0];
  } else if (name == "uniform") {
    if (v.size() != 1 && v.size() != 2) {
      *why = "uniform takes (scale) or (low,high)";
      return false;
    }
    s->kind = InitSpec::Kind::kUniform;
    s->a = v.size() == 1 ? -v[0] : v[0];
    s->b = v.size() == 1 ? v[0] : v[1];
    if (s->a > s->b) {
      *why = "the range is empty (low > high, or a negative scale)";
      return false;
    }
  } else {
    if (v.size() != 1 && v.size() != 2) {
      *why = "normal takes (sigma) or (mean,sigma)";
      return false;
    }
    s->kind = InitSpec::Kind::kNormal;
    s->a = v.size() == 1 ? 0 : v[0];
    s->b = v.back();
    if (s->b < 0) {
      *why = "sigma must not be negative";
      return false;
    }
  }
  return true;
}

// fan_in and fan_out of a weight (out, in, k...) or a vector.
void Fans(const Shape& s, double* fan_in, double* fan_out) {
  if (s.ndim() == 0) {
    *fan_in = *fan_out = 1;
    return;
  }
  double receptive = s.ndim() > 2 ? static_cast<double>(s.Prod(2, s.ndim())) : 1.0;
  *fan_in = s.ndim() > 1 ? s[1] * receptive : s[0];
  *fan_out = s[0] * receptive;
}

}  // namespace

std::string InitSpec::ToString() const {
  switch (kind) {
    case Kind::kXavier:
      return Fmt("xavier(", rnd == Rnd::kUniform ? "uniform" : "gaussian", ",", FactorName(factor), ",", magnitude,
                 ")");
    case Kind::kMsra: return Fmt("msra(", FactorName(factor), ")");
    case Kind::kUniform: return Fmt("uniform(", a, ",", b, ")");
    case Kind::kNormal: return Fmt("normal(", a, ",", b, ")");
    case Kind::kConstant: return Fmt("constant(", a, ")");
  }
  return "?";
}

InitSpec ParseInitSpec(const std::string& text, const std::string& where) {
  InitSpec s;
  std::string name, why;
  std::vector<std::string> args;
  bool ok = SplitCall(text, &name, &args, &why);
  if (ok) {
    if (name == "zero" || name == "one") {
      ok = args.empty();
      why = name + " takes no arguments";
      s.kind = InitSpec::Kind::kConstant;
      s.a = name == "one" ? 1 : 0;
    } else if (name == "xavier") {
      ok = ParseXavierArgs(args, &s, &why);
    } else if (name == "msra") {
      s.kind = InitSpec::Kind::kMsra;
      s.rnd = InitSpec::Rnd::kGaussian;
      s.factor = InitSpec::Factor::kIn;
      s.magnitude = 2;
      ok = args.size() <= 1 && (args.empty() || ParseFactor(args[0], &s.factor));
      why = "msra takes an optional factor type: in, out or avg";
    } else if (name == "uniform" || name == "normal" || name == "constant") {
      ok = ParseValues(name, args, &s, &why);
    } else {
      ok = false;
      why = name.empty() ? "no initializer name" : "unknown initializer '" + name + "'";
    }
  }
  FRUGAL_REQUIRE(ok, where, ": bad initializer '", text, "': ", why, " (", kForms, ")");
  return s;
}

void InitTensor(const InitSpec& spec, Tensor* t, Rng* rng) {
  float* w = t->f();
  const int64_t n = t->size();
  switch (spec.kind) {
    case InitSpec::Kind::kConstant: t->Fill(static_cast<float>(spec.a)); return;
    case InitSpec::Kind::kUniform:
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(spec.a + (spec.b - spec.a) * rng->Uniform());
      return;
    case InitSpec::Kind::kNormal:
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(spec.a + spec.b * rng->Normal());
      return;
    case InitSpec::Kind::kXavier:
    case InitSpec::Kind::kMsra: {
      double fan_in, fan_out;
      Fans(t->shape(), &fan_in, &fan_out);
      double fan = spec.factor == InitSpec::Factor::kIn    ? fan_in
                   : spec.factor == InitSpec::Factor::kOut ? fan_out
                                                           : (fan_in + fan_out) / 2.0;
      double scale = std::sqrt(spec.magnitude / fan);
      if (spec.rnd == InitSpec::Rnd::kUniform) {
        for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>((2.0 * rng->Uniform() - 1.0) * scale);
      } else {
        for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(rng->Normal() * scale);
      }
      return;
    }
  }
}

void InitParam(const std::string& init, const std::string& name, Tensor* t, Rng* rng) {
  InitTensor(ParseInitSpec(init, Fmt("parameter '", name, "'")), t, rng);
}

}  // namespace frugal
