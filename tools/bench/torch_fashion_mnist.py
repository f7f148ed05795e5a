#!/usr/bin/env python3
"""PyTorch (CPU) epoch times for the Fashion-MNIST models of models/mlp,
models/lenet and models/resnet (ResNet-20), to put beside `frugal train`'s
"Epoch[0] Time cost".

Same architecture, initialisation family (Xavier), batch, optimizer (SGD with
momentum 0.9) and learning rate as the configs: mlp and lenet batch 64,
weight decay 1e-4, constant lr; resnet20 batch 128, weight decay 5e-4, lr 0.1
on a cosine to 0 over 12 epochs of updates, stepped every update (the
config's lr_schedule_iters, so a one-epoch run follows the same schedule as frugal's
`--epochs 1`). The same IDX files (data/fashion-mnist/prepare.sh), pixels
scaled by 1/255, shuffled every epoch. Times the training pass of each epoch
(forward, backward, update; batches already in memory, as frugal's IDX
iterator has them), then the test accuracy after it.

    unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
    /tmp/torchvenv/bin/python tools/bench/torch_fashion_mnist.py --model mlp [--epochs 1] [--threads 2]
    /tmp/torchvenv/bin/python tools/bench/torch_fashion_mnist.py --model lenet
    /tmp/torchvenv/bin/python tools/bench/torch_fashion_mnist.py --model resnet20 [--max-iters N]
"""
import argparse
import gzip
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data", "fashion-mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 8:
        raise SystemExit("%s: not an IDX file of unsigned bytes" % path)
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    x = read_idx(os.path.join(DATA, split + "-images-idx3-ubyte.gz")).astype(np.float32) / 255
    y = read_idx(os.path.join(DATA, split + "-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class Mlp(nn.Module):  # models/mlp/fashion_mnist.prototxt: 784-512-512-10
    def __init__(self, hidden=512):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet(nn.Module):  # models/lenet/fashion_mnist.prototxt
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, padding=2, bias=False)
        self.bn1 = nn.BatchNorm2d(20, eps=1e-3, momentum=0.1)
        self.conv2 = nn.Conv2d(20, 50, 5, bias=False)
        self.bn2 = nn.BatchNorm2d(50, eps=1e-3, momentum=0.1)
        self.fc1, self.fc2 = nn.Linear(50 * 5 * 5, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class PreActUnit(nn.Module):
    """The basic units of models/resnet/resnet_cifar.prototxt: BN-ReLU-conv3x3,
    BN-ReLU-conv3x3, plus the input (u6) or a 1x1 projection of the first
    ReLU's output (u6_down, the first unit of each stage, stride 1 or 2)."""

    def __init__(self, cin, filters, stride, project):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin, eps=1e-3, momentum=0.1)
        self.conv1 = nn.Conv2d(cin, filters, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(filters, eps=1e-3, momentum=0.1)
        self.conv2 = nn.Conv2d(filters, filters, 3, 1, 1, bias=False)
        self.proj = nn.Conv2d(cin, filters, 1, stride, bias=False) if project else None

    def forward(self, x):
        a = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(a))))
        return y + (self.proj(a) if self.proj is not None else x)


class ResNetCifar(nn.Module):  # models/resnet/resnet_cifar.prototxt, basic units: depth 6n+2 (20: n = 3)
    def __init__(self, depth=20, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv0 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        units, cin = [], 16
        for filters, stride in [(16, 1), (32, 2), (64, 2)]:  # the first unit of every stage projects (u6_down)
            units += [PreActUnit(cin, filters, stride, True)] + [PreActUnit(filters, filters, 1, False)
                                                                  for _ in range(n - 1)]
            cin = filters
        self.units = nn.Sequential(*units)
        self.bn_out = nn.BatchNorm2d(cin, eps=1e-3, momentum=0.1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn_out(self.units(self.conv0(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def init_xavier(model):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def accuracy(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / len(x)


def main():
    p = argparse.ArgumentParser(description="PyTorch epoch times for the Fashion-MNIST models")
    p.add_argument("--model", choices=["mlp", "lenet", "resnet20"], required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=None, help="default: the config's (mlp, lenet 64; resnet20 128)")
    p.add_argument("--lr", type=float, default=None, help="default: the config's (mlp 0.02, lenet 0.05, resnet20 0.1)")
    p.add_argument("--max-iters", type=int, default=0, help="stop each epoch's timing after this many updates (0: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    lr = a.lr if a.lr is not None else {"mlp": 0.02, "lenet": 0.05, "resnet20": 0.1}[a.model]
    batch = a.batch if a.batch is not None else {"mlp": 64, "lenet": 64, "resnet20": 128}[a.model]
    wd = 5e-4 if a.model == "resnet20" else 1e-4
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = {"mlp": Mlp, "lenet": LeNet, "resnet20": ResNetCifar}[a.model]()
    init_xavier(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    updates_per_epoch = (len(xtr) + batch - 1) // batch
    if a.model == "resnet20":  # cosine from lr to 0 over the config's 12 epochs, every update
        schedule_iters = 12 * updates_per_epoch
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda it: (1 + math.cos(math.pi * min(it, schedule_iters) / schedule_iters)) / 2)
    else:
        sched = None
    print("torch %s, %d threads, %s, batch %d, lr %g, weight decay %g" % (
        torch.__version__, torch.get_num_threads(), a.model, batch, lr, wd))
    for epoch in range(a.epochs):
        order = torch.randperm(len(xtr))
        t0 = time.perf_counter()
        updates = 0
        for i in range(0, len(xtr), batch):
            if a.max_iters and updates == a.max_iters:
                break
            idx = order[i:i + batch]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            updates += 1
        seconds = time.perf_counter() - t0
        print("epoch %d: %.2f s for %d updates, test accuracy %.4f" % (
            epoch, seconds, updates, accuracy(model, xte, yte, 1000)))


if __name__ == "__main__":
    main()
