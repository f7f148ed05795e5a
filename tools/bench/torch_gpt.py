"""PyTorch peer of models/gpt/gpt.prototxt: one training step's time and the process peak.

The same model: a token and a learned position embedding, `layers` pre-LN blocks (layer_norm,
a fused q/k/v projection, causal scaled_dot_product_attention, an output projection, residual
add; layer_norm, a GELU MLP of 4 x d_model, residual add), a final layer_norm and a classifier
over the vocabulary with cross-entropy at every position. Dropout 0 (both sides), Adam lr 1e-3.
Synthetic tokens in [0, vocab). Strategies: plain; ckpt = torch.utils.checkpoint on every block
(use_reentrant=False), as a user who runs out of memory would do.
Prints one JSON line: median step seconds over --steps after --warmup, the RSS before the first
step (the model, its inputs and torch's libraries) and the peak (VmHWM), in MiB.
Usage: torch_gpt.py --layers 6 --d-model 512 --heads 8 --seq-len 1024 --batch 2 --vocab 50257
       --strategy plain|ckpt [--warmup 1 --steps 2 --threads 2]
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024.0, 1)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, d, heads, seq_len, vocab, ckpt):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(seq_len, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.ckpt = ckpt

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.ckpt else blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--strategy", choices=["plain", "ckpt"], default="plain")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Gpt(a.layers, a.d_model, a.heads, a.seq_len, a.vocab, a.strategy == "ckpt")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq_len))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq_len))

    rss_before = status_mib("VmRSS")

    def step():
        opt.zero_grad(set_to_none=True)
        model(tokens, targets).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    ts = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t)
    ts.sort()
    med = ts[len(ts) // 2] if len(ts) % 2 else (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]) / 2
    print(json.dumps(dict(framework=f"pytorch-{torch.__version__}", threads=torch.get_num_threads(),
                          workload="gpt", layers=a.layers, d_model=a.d_model, heads=a.heads, seq_len=a.seq_len,
                          batch=a.batch, vocab=a.vocab, strategy=a.strategy, step_s_median=round(med, 3),
                          step_s=[round(t, 3) for t in ts], rss_before_mib=rss_before,
                          peak_rss_mib=status_mib("VmHWM"))), flush=True)


if __name__ == "__main__":
    main()
