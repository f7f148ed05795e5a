#!/usr/bin/env python3
"""PyTorch (CUDA) figures beside `frugal time --gpus 0` for the
pre-activation bottleneck ResNet of models/resnet/resnet_imagenet.prototxt:
the same units per stage (depth 50: [3, 4, 6, 3]; depth 1001: [3, 24, 303, 3]),
3x224x224 inputs, 1000 classes. Times one forward and backward pass (no
optimizer update), as `frugal time` does, and reports images/s and the peak
of torch.cuda.max_memory_allocated.

    python3 tools/bench/torch_resnet_gpu.py --depth 50 --batch 64 [--checkpoint]

--checkpoint wraps the units in torch.utils.checkpoint.checkpoint_sequential
with sqrt(units) segments (the sqrt plan of Chen et al.). TF32 is off, as in
frugal's CUDA kernels (plain FP32 on cuBLAS and cuDNN).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential


class Unit(nn.Module):
    """BN-ReLU-conv1x1, BN-ReLU-conv3x3, BN-ReLU-conv1x1 plus the shortcut."""

    def __init__(self, cin, filters, stride):
        super().__init__()
        mid = filters // 4
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, mid, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(mid), nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn3, self.conv3 = nn.BatchNorm2d(mid), nn.Conv2d(mid, filters, 1, bias=False)
        self.down = None
        if stride != 1 or cin != filters:
            self.down = nn.Conv2d(cin, filters, 1, stride, bias=False)

    def forward(self, x):
        a = F.relu(self.bn1(x))
        y = self.conv1(a)
        y = self.conv2(F.relu(self.bn2(y)))
        y = self.conv3(F.relu(self.bn3(y)))
        return y + (self.down(a) if self.down is not None else x)


def units_for(depth):
    if depth >= 200:
        return [3, 24, (depth - 2) // 3 - 30, 3]
    if depth >= 152:
        return [3, 8, 36, 3]
    if depth >= 101:
        return [3, 4, 23, 3]
    return [3, 4, 6, 3]


def build(depth):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, n in enumerate(units_for(depth)):
        filters = 256 * 2 ** stage
        for i in range(n):
            layers.append(Unit(cin, filters, 2 if i == 0 and stage > 0 else 1))
            cin = filters
    head = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000))
    return nn.Sequential(*layers), head


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--checkpoint", action="store_true")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    body, head = build(a.depth)
    body, head = body.to(dev), head.to(dev)
    x = torch.randn(a.batch, 3, 224, 224, device=dev, requires_grad=True)
    label = torch.randint(0, 1000, (a.batch,), device=dev)
    segments = max(1, int(math.sqrt(len(body))))

    def step():
        if a.checkpoint:
            y = checkpoint_sequential(body, segments, x, use_reentrant=False)
        else:
            y = body(x)
        F.cross_entropy(head(y), label).backward()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.iters
    mode = f"checkpoint ({segments} segments)" if a.checkpoint else "plain"
    print(f"pytorch {torch.__version__} resnet depth {a.depth} batch {a.batch} {mode}: {ms:.1f} ms/step, "
          f"{a.batch * 1e3 / ms:.1f} images/s, peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
