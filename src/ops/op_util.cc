#include "ops/op_util.h"

namespace frugal {

void InferSameShape(ShapeCtx& c) {
  const Shape* known = nullptr;
  for (const Shape& s : c.in)
    if (s.known()) { known = &s; break; }
  if (!known) c.Fail("cannot infer shapes: no input shape is known");
  Shape s = *known;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.in[i].known()) c.in[i] = s;
    if (c.in[i] != s) {
      c.Fail(Fmt("input ", i, " has shape ", c.in[i], " but input 0 has ", s,
                 " (this op needs equal shapes)"));
    }
  }
  for (Shape& o : c.out) o = s;
}

void InferAsForwardInputs(ShapeCtx& c) {
  for (size_t i = 0; i < c.out.size(); ++i) c.out[i] = (*c.fwd_in)[i];
}

}  // namespace frugal
