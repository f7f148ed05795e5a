"""Writes models with MXNet itself, for tests/interchange/mxnet_import_test.cc.

Small models, each as MXNet's files and the output MXNet computes:
  cnn:  Convolution, BatchNorm (learned gamma, and fix_gamma), Activation
        (relu, tanh), max Pooling, a 1x1 projection, elemwise_add, LeakyReLU,
        Concat, global average Pooling, Flatten, Dropout, FullyConnected,
        SoftmaxOutput, written by Module.save_checkpoint;
  lstm: MXNet's LSTM example (example/rnn/old/lstm.py), two layers unrolled
        over 5 steps: Embedding, SliceChannel, FullyConnected with weights
        shared by the steps, elemwise_add/mul, initial states as variables
        with a shape (fed zeros), Dropout, Concat, transpose, Reshape,
        SoftmaxOutput; written by Symbol.save and mx.nd.save.
  rnn:  mx.rnn's own cells: a SequentialRNNCell of two LSTMCells unrolled
        over 5 steps, their begin states mx.sym.zeros of shape (0, hidden)
        (_zeros, the batch inferred), under log_softmax, SoftmaxActivation
        and softmax (no loss: an exported predictor);
        written by Symbol.save and mx.nd.save;
  fused: the fused RNN operator, mx.sym.RNN in LSTM mode (two layers,
        dropout between them, its parameters one packed array, its begin
        states mx.sym.zeros), over the embedded tokens made sequence-major
        by transpose, under FullyConnected and softmax; written by
        Symbol.save and mx.nd.save;
  gluon: gluon.rnn.LSTM (two layers, layout NTC: SwapAxis around the RNN,
        its parameters packed by _rnn_param_concat) between an Embedding and
        a Dense over every step, hybridized and written by HybridBlock.export;
  lrn:  Convolution, relu, LRN (across 5 channels), max Pooling,
        FullyConnected, SoftmaxOutput, written by Module.save_checkpoint;
  fusedcell: mx.rnn.FusedRNNCell (two LSTM layers) unrolled over the
        embedded tokens, layout NTC (SwapAxis around its RNN, begin states
        _zeros), under FullyConnected; written by Symbol.save and mx.nd.save;
  fusedstate: fused as above, begun from learned states (variables of
        (layers, batch, hidden) with arrays in the params file).
For each, OUT/NAME-symbol.json, OUT/NAME-0000.params and OUT/NAME-io.params
(the arrays "data" and "output": an input and MXNet's output for it, in
inference).

    python3 tools/mxnet/make_test_files.py tests/mxnet

Needs mxnet 1.9.1 (pip install mxnet==1.9.1 "numpy<1.24", in a venv); frugal
itself does not depend on it. The files are committed; run this again only
to change the models.
"""
import os
import sys
from collections import namedtuple

import mxnet as mx
import numpy as np


def cnn():
    data = mx.sym.Variable('data')
    c1 = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True, name='conv1')
    b1 = mx.sym.BatchNorm(c1, fix_gamma=False, eps=2e-5, name='bn1')
    r1 = mx.sym.Activation(b1, act_type='relu', name='relu1')
    p1 = mx.sym.Pooling(r1, kernel=(2, 2), stride=(2, 2), pool_type='max', name='pool1')
    c2 = mx.sym.Convolution(p1, kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True, name='conv2')
    b2 = mx.sym.BatchNorm(c2, name='bn2')
    t2 = mx.sym.Activation(b2, act_type='tanh', name='tanh2')
    proj = mx.sym.Convolution(p1, kernel=(1, 1), num_filter=8, name='proj')
    add = mx.sym.elemwise_add(t2, proj, name='add')
    leaky = mx.sym.LeakyReLU(add, act_type='leaky', slope=0.2, name='lrelu')
    cat = mx.sym.Concat(leaky, p1, dim=1, name='cat')
    pool = mx.sym.Pooling(cat, kernel=(7, 7), global_pool=True, pool_type='avg', name='gpool')
    drop = mx.sym.Dropout(mx.sym.Flatten(pool, name='flat'), p=0.3, name='drop')
    fc = mx.sym.FullyConnected(drop, num_hidden=10, name='fc')
    return mx.sym.SoftmaxOutput(fc, name='softmax')


def fused_cell():
    cell = mx.rnn.FusedRNNCell(HIDDEN, num_layers=LAYERS, mode='lstm', prefix='lstm_')
    embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED, name='embed')
    out, _ = cell.unroll(STEPS, inputs=embed, layout='NTC', merge_outputs=True)
    return mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, HIDDEN)), num_hidden=VOCAB, name='pred')


def lrn():
    data = mx.sym.Variable('data')
    c = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name='conv')
    r = mx.sym.Activation(c, act_type='relu', name='relu')
    n = mx.sym.LRN(r, nsize=5, alpha=0.05, beta=0.75, knorm=2, name='norm')
    p = mx.sym.Pooling(n, kernel=(2, 2), stride=(2, 2), pool_type='max', name='pool')
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(p, num_hidden=10, name='fc'), name='softmax')


def checkpoint_model(out_dir, name, sym, x, rng):
    """Module.save_checkpoint's files, and MXNet's output for x."""
    args, aux, out = run(sym, {'data': x, 'softmax_label': np.zeros((x.shape[0],), np.float32)}, rng)
    module = mx.mod.Module(sym, context=mx.cpu())
    module.bind(data_shapes=[('data', x.shape)], label_shapes=[('softmax_label', (x.shape[0],))], for_training=False)
    module.set_params(args, aux)
    module.save_checkpoint(os.path.join(out_dir, name), 0)
    mx.nd.save(os.path.join(out_dir, name + '-io.params'), {'data': mx.nd.array(x), 'output': out})


LSTMState = namedtuple('LSTMState', ['c', 'h'])
LSTMParam = namedtuple('LSTMParam', ['i2h_weight', 'i2h_bias', 'h2h_weight', 'h2h_bias'])
BATCH, STEPS, HIDDEN, EMBED, VOCAB, LAYERS = 4, 5, 16, 8, 20, 2


def lstm_cell(indata, prev, param, t, layer):
    i2h = mx.sym.FullyConnected(indata, weight=param.i2h_weight, bias=param.i2h_bias, num_hidden=HIDDEN * 4,
                                name='t%d_l%d_i2h' % (t, layer))
    h2h = mx.sym.FullyConnected(prev.h, weight=param.h2h_weight, bias=param.h2h_bias, num_hidden=HIDDEN * 4,
                                name='t%d_l%d_h2h' % (t, layer))
    gates = mx.sym.SliceChannel(i2h + h2h, num_outputs=4, name='t%d_l%d_slice' % (t, layer))
    in_gate = mx.sym.Activation(gates[0], act_type='sigmoid')
    in_transform = mx.sym.Activation(gates[1], act_type='tanh')
    forget_gate = mx.sym.Activation(gates[2], act_type='sigmoid')
    out_gate = mx.sym.Activation(gates[3], act_type='sigmoid')
    c = forget_gate * prev.c + in_gate * in_transform
    return LSTMState(c=c, h=out_gate * mx.sym.Activation(c, act_type='tanh'))


def lstm():
    params, states = [], []
    for i in range(LAYERS):
        params.append(LSTMParam(*[mx.sym.Variable('l%d_%s' % (i, n)) for n in LSTMParam._fields]))
        states.append(LSTMState(c=mx.sym.Variable('l%d_init_c' % i, shape=(BATCH, HIDDEN)),
                                h=mx.sym.Variable('l%d_init_h' % i, shape=(BATCH, HIDDEN))))
    embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED,
                             weight=mx.sym.Variable('embed_weight'), name='embed')
    words = mx.sym.SliceChannel(embed, num_outputs=STEPS, squeeze_axis=1)
    hidden_all = []
    for t in range(STEPS):
        hidden = words[t]
        for i in range(LAYERS):
            if i > 0:
                hidden = mx.sym.Dropout(hidden, p=0.2)
            states[i] = lstm_cell(hidden, states[i], params[i], t, i)
            hidden = states[i].h
        hidden_all.append(hidden)
    pred = mx.sym.FullyConnected(mx.sym.Concat(*hidden_all, dim=0), num_hidden=VOCAB,
                                 weight=mx.sym.Variable('cls_weight'), bias=mx.sym.Variable('cls_bias'), name='pred')
    label = mx.sym.Reshape(mx.sym.transpose(mx.sym.Variable('softmax_label')), shape=(-1,))
    return mx.sym.SoftmaxOutput(pred, label=label, name='softmax')


def rnn():
    cells = mx.rnn.SequentialRNNCell()
    for i in range(LAYERS):
        cells.add(mx.rnn.LSTMCell(num_hidden=HIDDEN, prefix='lstm_l%d_' % i))
    embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED, name='embed')
    words = mx.sym.SliceChannel(embed, num_outputs=STEPS, axis=1, squeeze_axis=1, name='words')
    outputs, _ = cells.unroll(STEPS, inputs=[words[t] for t in range(STEPS)], merge_outputs=False)
    pred = mx.sym.FullyConnected(mx.sym.Concat(*outputs, dim=0), num_hidden=VOCAB, name='pred')
    logp = mx.sym.log_softmax(pred, axis=-1, name='logp')
    return mx.sym.softmax(mx.sym.SoftmaxActivation(logp, name='act'), axis=-1, name='prob')


def fused():
    embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED, name='embed')
    steps = mx.sym.transpose(embed, axes=(1, 0, 2), name='steps')
    zeros = [mx.sym.zeros((LAYERS, 0, HIDDEN), name='lstm_begin_%s' % s) for s in ('h', 'c')]
    out = mx.sym.RNN(steps, mx.sym.Variable('lstm_parameters'), zeros[0], zeros[1], state_size=HIDDEN,
                     num_layers=LAYERS, mode='lstm', p=0.2, name='lstm')
    pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, HIDDEN)), num_hidden=VOCAB, name='pred')
    return mx.sym.softmax(pred, axis=-1, name='prob')


def fused_state():
    embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED, name='embed')
    steps = mx.sym.transpose(embed, axes=(1, 0, 2), name='steps')
    begin = [mx.sym.Variable('lstm_begin_%s' % s) for s in ('h', 'c')]
    out = mx.sym.RNN(steps, mx.sym.Variable('lstm_parameters'), begin[0], begin[1], state_size=HIDDEN,
                     num_layers=LAYERS, mode='lstm', name='lstm')
    pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, HIDDEN)), num_hidden=VOCAB, name='pred')
    return mx.sym.softmax(pred, axis=-1, name='prob')


class GluonLstm(mx.gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = mx.gluon.nn.Embedding(VOCAB, EMBED)
            self.lstm = mx.gluon.rnn.LSTM(HIDDEN, num_layers=LAYERS, layout='NTC', dropout=0.2)
            self.out = mx.gluon.nn.Dense(VOCAB, flatten=False)

    def hybrid_forward(self, F, x):
        return self.out(self.lstm(self.embed(x)))


def run(sym, inputs, rng):
    """Random weights (BatchNorm's statistics and scales away from 0 and 1)
    and MXNet's inference output for inputs."""
    shapes = {k: v.shape for k, v in inputs.items()}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    args = {n: mx.nd.array(rng.uniform(0.5, 1.5, s) if n.endswith('gamma') else rng.uniform(-0.3, 0.3, s))
            for n, s in zip(sym.list_arguments(), arg_shapes) if n not in inputs}
    aux = {n: mx.nd.array(rng.uniform(0.5, 1.5, s) if n.endswith('var') else rng.uniform(-0.3, 0.3, s))
           for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    feed = dict(args)
    feed.update({k: mx.nd.array(v) for k, v in inputs.items()})
    out = sym.bind(mx.cpu(), feed, aux_states=aux).forward(is_train=False)[0]
    return args, aux, out


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.RandomState(20)
    checkpoint_model(out_dir, 'cnn', cnn(), rng.uniform(0, 1, (4, 1, 14, 14)).astype(np.float32), rng)

    def symbol_model(name, sym, inputs):
        args, _, out = run(sym, inputs, rng)
        sym.save(os.path.join(out_dir, name + '-symbol.json'))
        mx.nd.save(os.path.join(out_dir, name + '-0000.params'), {'arg:' + k: v for k, v in args.items()})
        mx.nd.save(os.path.join(out_dir, name + '-io.params'), {'data': mx.nd.array(inputs['data']), 'output': out})

    tokens = rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)
    inputs = {'data': tokens, 'softmax_label': np.zeros((BATCH, STEPS), np.float32)}
    for i in range(LAYERS):
        for s in ('c', 'h'):
            inputs['l%d_init_%s' % (i, s)] = np.zeros((BATCH, HIDDEN), np.float32)
    symbol_model('lstm', lstm(), inputs)
    symbol_model('rnn', rnn(), {'data': rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)})
    symbol_model('fused', fused(), {'data': rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)})

    tokens = rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)
    mx.random.seed(20)
    net = GluonLstm()
    net.initialize(mx.init.Uniform(0.3))
    net.hybridize()
    out = net(mx.nd.array(tokens))  # not training: dropout is off
    net.export(os.path.join(out_dir, 'gluon'))
    mx.nd.save(os.path.join(out_dir, 'gluon-io.params'), {'data': mx.nd.array(tokens), 'output': out})

    checkpoint_model(out_dir, 'lrn', lrn(), rng.uniform(0, 1, (4, 3, 8, 8)).astype(np.float32), rng)
    symbol_model('fusedcell', fused_cell(), {'data': rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)})
    symbol_model('fusedstate', fused_state(), {'data': rng.randint(0, VOCAB, (BATCH, STEPS)).astype(np.float32)})


if __name__ == '__main__':
    main(sys.argv[1])
