#!/usr/bin/env python3
"""PyTorch (CPU) figures for the operator benchmarks in tools/bench/*.prototxt.

Times forward and backward of each op the way `frugal time` does: the input
requires a gradient (as inside a deeper net), averages over --iters after
--warmup, on torch.get_num_threads() threads (set with --threads).

    pip install torch            # PyPI's wheel
    unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
    python3 tools/bench/torch_ops.py [--iters 20] [--warmup 3] [--threads 2]
"""
import argparse
import time

import torch
import torch.nn.functional as F


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iters


def bench(name, make_inputs, forward, iters, warmup):
    inputs = make_inputs()
    y = forward(*inputs)
    dy = torch.randn_like(y)

    def fwd():
        with torch.no_grad():
            forward(*inputs)

    def fwd_bwd():
        for t in inputs:
            t.grad = None
        forward(*inputs).backward(dy)

    f = timed(fwd, iters, warmup)
    fb = timed(fwd_bwd, iters, warmup)
    print(f"{name:34s} forward {f:9.3f} ms   backward {fb - f:9.3f} ms   forward+backward {fb:9.3f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, mkldnn {torch.backends.mkldnn.is_available()}")

    def param(*shape):
        return torch.randn(*shape, requires_grad=True)

    bench("conv 3x3 64->64 56x56 batch 32",
          lambda: (param(32, 64, 56, 56), param(64, 64, 3, 3)),
          lambda x, w: F.conv2d(x, w, padding=1), args.iters, args.warmup)
    bench("conv 1x1 256->64 56x56 batch 32",
          lambda: (param(32, 256, 56, 56), param(64, 256, 1, 1)),
          lambda x, w: F.conv2d(x, w), args.iters, args.warmup)
    bench("batch_norm (32,64,56,56)",
          lambda: (param(32, 64, 56, 56), param(64), param(64)),
          lambda x, g, b: F.batch_norm(x, torch.zeros(64), torch.ones(64), g, b, training=True,
                                       momentum=0.1, eps=1e-3),
          args.iters, args.warmup)
    bench("relu (32,64,56,56)",
          lambda: (param(32, 64, 56, 56),),
          lambda x: F.relu(x), args.iters, args.warmup)
    bench("batch_norm + relu (32,64,56,56)",
          lambda: (param(32, 64, 56, 56), param(64), param(64)),
          lambda x, g, b: F.relu(F.batch_norm(x, torch.zeros(64), torch.ones(64), g, b, training=True,
                                              momentum=0.1, eps=1e-3)),
          args.iters, args.warmup)
    bench("fully_connected 4096x4096 batch 128",
          lambda: (param(128, 4096), param(4096, 4096), param(4096)),
          lambda x, w, b: F.linear(x, w, b), args.iters, args.warmup)


if __name__ == "__main__":
    main()
