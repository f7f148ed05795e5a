// MXNet operators that frugal computes as several of its own (the fused
// RNN, LRN), written as the nodes import-mxnet maps.
#pragma once

#include "frugal/mxnet.h"

namespace frugal {

// Each RNN node of `sym` in LSTM mode becomes, over its sequence-major data
// (T, B, I): a transpose to batch first, one `lstm` layer per num_layers
// (as an "RNN" node with num_hidden, the rule mxnet_import.cc maps to
// frugal's lstm), dropout p between layers, and a transpose back to
// (T, B, H). Its parameters are unpacked from MXNet's layout (every
// layer's i2h then h2h weights, then every layer's i2h then h2h biases,
// gates i, f, g, o as frugal's) into arrays "<rnn>_l<k>_i2h_weight" and so
// on, read from the packed array itself (mx.rnn.FusedRNNCell, mx.sym.RNN)
// or from the arrays gluon's `_rnn_param_concat` packs (flattened by
// Reshape). Begin states must be zeros (`_zeros`, or a variable with a
// __shape__); a SwapAxis of dims 0 and 1 before or after an RNN (gluon's
// layout NTC) becomes a transpose. Nodes no head reads any more are
// removed, and so are the arrays they read. Throws Error naming the node
// for what frugal's lstm does not compute (another mode, bidirectional,
// projection, state clipping, a read of the final states).
// Each LRN node (across channels, 4-D NCHW input, odd nsize) becomes
// x * exp(-beta log(knorm + alpha * avg)), avg the average of x^2 over the
// nsize channels around (an average pooling of x^2 made (N, H, C, W), its
// padding counted, as MXNet's alpha / nsize * sum).
void LowerComposites(MxnetSymbol* sym, NamedTensors* arrays);

}  // namespace frugal
