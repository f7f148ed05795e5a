#!/usr/bin/env python3
"""frugal export-onnx checked by an independent runtime: onnxruntime.

For the MLP, LeNet and ResNet-20 on Fashion-MNIST and the char LSTM on the
fortunes text (data/text/prepare.sh): train briefly (`frugal train
--max-iters N`), `frugal test` the checkpoint, export it (`frugal
export-onnx`), then run the .onnx with onnxruntime over the same test samples
and compare top-1 accuracy and cross-entropy (per character for the LSTM, over
its outputs at every step), and the time per sample of both (`frugal test`
includes reading the data; onnxruntime's is inference alone). The samples:
the 10,000 test images (pixels / 255, as frugal's IDX reader scales them);
the validation text cut as frugal's TextIter cuts it without bptt (sequence k
is characters [k T, k T + T), its labels one further; character ids from
train.txt's vocabulary in order of first occurrence, 0 for unknown ones).

  /path/to/venv/bin/python tools/bench/onnx_runtime.py [--frugal build/frugal] [--iters 100]

onnxruntime and numpy come from pip in a venv: a benchmark's peers, not
frugal's dependencies. Figures and command: docs/benchmarks.md.
"""
import argparse
import gzip
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort

MODELS = [  # name, config, --define values, test samples
    ("MLP", "models/mlp/fashion_mnist.prototxt", [], "images"),
    ("LeNet", "models/lenet/fashion_mnist.prototxt", [], "images"),
    ("ResNet-20", "models/resnet/resnet_cifar.prototxt", ["depth=20"], "images"),
    ("char LSTM", "models/lstm/char_lm.prototxt", [], "text"),
]


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def text_sequences(seq_len):
    """frugal's validation sequences of models/lstm/char_lm.prototxt: (data, labels) of shape (n, seq_len)."""
    train = np.frombuffer(open("data/text/train.txt", "rb").read(), np.uint8)
    chars, first = np.unique(train, return_index=True)
    ids = np.zeros(256, np.int64)  # 0: <unk>
    ids[chars[np.argsort(first)]] = np.arange(1, len(chars) + 1)
    tokens = ids[np.frombuffer(open("data/text/valid.txt", "rb").read(), np.uint8)]
    n = (len(tokens) - 1) // seq_len
    return tokens[:n * seq_len].reshape(n, seq_len), tokens[1:n * seq_len + 1].reshape(n, seq_len)


def frugal(args, *words):
    out = subprocess.run([args.frugal, *words], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(words)}: {out.stderr.strip().splitlines()[-1]}")
    return out.stdout + out.stderr


def run_onnx(path, x, labels):
    """Accuracy and cross-entropy per label (labels (n) or (n, steps): one output per step), seconds per sample."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    batch = inp.shape[0]
    x = x.astype(np.float32).reshape(len(x), *inp.shape[1:])
    labels = labels.reshape(len(x), -1)
    correct, loss, seconds = 0, 0.0, 0.0
    for i in range(0, len(x), batch):
        chunk = x[i:i + batch]
        n = len(chunk)
        if n < batch:  # the model's batch is fixed: pad the last one
            chunk = np.concatenate([chunk, np.zeros((batch - n, *chunk.shape[1:]), np.float32)])
        t0 = time.perf_counter()
        probs = sess.run(None, {inp.name: chunk})
        seconds += time.perf_counter() - t0
        for step, prob in enumerate(probs):
            prob, y = prob[:n], labels[i:i + n, step]
            correct += int((prob.argmax(1) == y).sum())
            loss -= float(np.log(np.maximum(prob[np.arange(n), y], 1e-30)).sum())
    return correct / labels.size, loss / labels.size, seconds / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frugal", default="build/frugal")
    ap.add_argument("--iters", type=int, default=100, help="training iterations before the export")
    args = ap.parse_args()
    samples = {
        "images": (idx("data/fashion-mnist/t10k-images-idx3-ubyte.gz") / 255,
                   idx("data/fashion-mnist/t10k-labels-idx1-ubyte.gz").astype(np.int64)),
        "text": text_sequences(64),  # char_lm.prototxt's seq_len
    }
    print(f"onnxruntime {ort.__version__}, {args.iters} training iterations, "
          f"{len(samples['images'][0])} test images, {len(samples['text'][0])} validation sequences of 64 characters")
    print("| model | frugal test: accuracy, cross-entropy, ms/sample | onnxruntime: accuracy, cross-entropy, "
          "ms/sample |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, config, defines, kind in MODELS:
            x, labels = samples[kind]
            d = [w for v in defines for w in ("--define", v)]
            ck = os.path.join(tmp, name)
            frugal(args, "train", "--config", config, *d, "--max-iters", str(args.iters), "--checkpoint-dir", ck)
            checkpoint = os.path.join(ck, sorted(f for f in os.listdir(ck) if f.endswith(".frugal"))[-1])
            t0 = time.perf_counter()
            test = frugal(args, "test", "--config", config, *d, "--checkpoint", checkpoint)
            test_ms = (time.perf_counter() - t0) * 1e3 / len(x)
            acc = float(re.search(r"test-accuracy=([0-9.]+)", test).group(1))
            ce = float(re.search(r"test-cross_entropy=([0-9.]+)", test).group(1))
            model = os.path.join(tmp, name + ".onnx")
            frugal(args, "export-onnx", "--config", config, *d, "--checkpoint", checkpoint, "--out", model)
            o_acc, o_ce, o_s = run_onnx(model, x, labels)
            print(f"| {name} | {acc:.4f}, {ce:.4f}, {test_ms:.3f} | {o_acc:.4f}, {o_ce:.4f}, {o_s * 1e3:.3f} |")


if __name__ == "__main__":
    main()
