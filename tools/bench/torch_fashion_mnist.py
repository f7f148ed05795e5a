#!/usr/bin/env python3
"""PyTorch (CPU) epoch times for the Fashion-MNIST models of models/mlp and
models/lenet, to put beside `frugal train`'s "Epoch[0] Time cost".

Same architecture, initialisation family (Xavier), batch, optimizer (SGD with
momentum 0.9, weight decay 1e-4) and learning rate as the configs; the same
IDX files (data/fashion-mnist/prepare.sh), pixels scaled by 1/255, shuffled
every epoch. Times the training pass of each epoch (forward, backward,
update; batches already in memory, as frugal's IDX iterator has them), then
the test accuracy after it.

    unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
    /tmp/torchvenv/bin/python tools/bench/torch_fashion_mnist.py --model mlp [--epochs 1] [--threads 2]
    /tmp/torchvenv/bin/python tools/bench/torch_fashion_mnist.py --model lenet
"""
import argparse
import gzip
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
    p.add_argument("--model", choices=["mlp", "lenet"], required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=None, help="default: the config's (mlp 0.02, lenet 0.05)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    lr = a.lr if a.lr is not None else {"mlp": 0.02, "lenet": 0.05}[a.model]
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = Mlp() if a.model == "mlp" else LeNet()
    init_xavier(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    print("torch %s, %d threads, %s, batch %d, lr %g" % (torch.__version__, torch.get_num_threads(), a.model,
                                                         a.batch, lr))
    for epoch in range(a.epochs):
        order = torch.randperm(len(xtr))
        t0 = time.perf_counter()
        for i in range(0, len(xtr), a.batch):
            idx = order[i:i + a.batch]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - t0
        print("epoch %d: %.2f s, test accuracy %.4f" % (epoch, seconds, accuracy(model, xte, yte, 1000)))


if __name__ == "__main__":
    main()
