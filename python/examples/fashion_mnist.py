"""Train the MLP of models/mlp on Fashion-MNIST held in numpy arrays, look at
its memory plan, and plot the memory timeline of two strategies.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/fashion_mnist.py [--max-iters N] [--plot FILE.png]

Run from the repository (the data comes from data/fashion-mnist, which
`make data` prepares from Debian's dataset-fashion-mnist).
"""
import argparse
import gzip

import numpy as np

import frugal

DATA = "data/fashion-mnist/"


def read_idx(path):
    """An IDX file (gzip) as a numpy array: uint8 images (N, 28, 28) or labels (N,)."""
    with gzip.open(path) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split):
    """Samples (N, 1, 28, 28) in [0, 1] as float32, and class indices (N,)."""
    x = read_idx(DATA + split + "-images-idx3-ubyte.gz")
    y = read_idx(DATA + split + "-labels-idx1-ubyte.gz")
    return (x[:, None, :, :] * np.float32(1 / 255)).astype(np.float32), y.astype(np.float32)


def train(max_iters=None, hidden=128):
    model = frugal.Model("models/mlp/fashion_mnist.prototxt", defines={"hidden": hidden, "epochs": 1})
    plan = model.plan("sqrt")
    print("sqrt plan: arena %.2f MiB, %d nodes recomputed" % (plan["arena_bytes"] / 2**20, plan["num_recomputed"]))
    history = []
    acc = model.train(data=load("train"), val_data=load("t10k"), max_iters=max_iters,
                      callbacks=[lambda e: history.append(e)], quiet=True)
    print("validation accuracy %.4f after %d batches" % (acc, history[-1]["iterations"]))
    return model, acc, history


def plot(model, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for memory in ["share", "sqrt"]:
        t = model.timeline(memory)
        live = t["forward"] + t["recomputed"] + t["gradients"] + t["workspace"]
        ax.plot(t["steps"], live / 2**20, label="%s (peak %.2f MiB)" % (memory, t["peak_bytes"] / 2**20))
    ax.axvline(t["backward_step"], color="grey", linestyle=":")
    ax.set_xlabel("step")
    ax.set_ylabel("live MiB")
    ax.legend()
    fig.savefig(path)
    print("timeline:", path)


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--max-iters", type=int, default=None)
    args.add_argument("--plot", default="")
    a = args.parse_args()
    model, _, _ = train(a.max_iters)
    if a.plot:
        plot(model, a.plot)
