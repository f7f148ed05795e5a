// Window attributes shared by convolution, deconvolution and pooling
// (MXNet's names): kernel, stride, dilate, pad as 2-D tuples.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "frugal/op.h"

namespace frugal {

using Pair = std::array<int64_t, 2>;

// Reads a 2-tuple attribute "(a,b)" (a single value means both); dflt when
// absent. min is the smallest allowed entry.
Pair ReadPair(AttrReader& a, const std::string& key, Pair dflt, int64_t min, bool required = false);

// "(a,b)" for keys and messages.
std::string PairStr(const Pair& p);

// Output length of a sliding window: floor((in + 2 pad - span) / stride) + 1
// where span = dilate (kernel - 1) + 1; ceil instead of floor when ceil_mode.
int64_t WindowOut(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilate, bool ceil_mode = false);

struct ConvParams {
  Pair kernel{}, stride{1, 1}, dilate{1, 1}, pad{0, 0};
  int64_t num_filter = 0, num_group = 1;
  bool no_bias = false;
  // deconvolution only
  Pair adj{0, 0}, target_shape{0, 0};
  bool has_target_shape = false;

  std::string Key() const;  // for the primitive cache
};
// Reads the attributes common to convolution and deconvolution.
ConvParams ReadConvParams(AttrReader& a);
// Inputs: x, weight, and bias unless no_bias.
int ConvNumInputs(const std::any& p);
// The forward node's x must be (N, C, H, W); fails naming the node if not.
void RequireNchw(const ShapeCtx& c, const Shape& x);
// The inputs of a convolution, or with `transposed` a deconvolution: x
// (N, C, H, W) with C a multiple of num_group; the weight (num_filter,
// C / num_group, kh, kw), transposed (C, num_filter / num_group, kh, kw);
// the bias (num_filter) unless no_bias. Each parameter's shape is set where
// unknown, else checked; fails naming the node.
void InferConvInputs(ShapeCtx& c, bool transposed);

}  // namespace frugal
