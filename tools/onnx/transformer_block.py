"""Exports a pre-LN Transformer block from PyTorch as an ONNX backend test.

Writes OUT/test_transformer_block/{model.onnx, test_data_set_0/input_0.pb,
output_0.pb} in the layout of ONNX's own backend tests, so that
`frugal onnx-test OUT` imports the model and compares its output with
PyTorch's. The block is what a GPT stacks: layer norm, causal multi-head
attention (scaled_dot_product_attention), a residual, layer norm, a GELU MLP
(the exact erf form), a residual.

    python3 tools/onnx/transformer_block.py tests/onnx/pytorch

Needs torch and onnx (pip, in a venv); frugal itself depends on neither.
The files are committed; run this again only to change the block.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper


class Block(torch.nn.Module):
    def __init__(self, d_model=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.fc1 = torch.nn.Linear(d_model, 4 * d_model)
        self.fc2 = torch.nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def main(out_dir):
    torch.manual_seed(0)
    block = Block().eval()
    with torch.no_grad():  # visible statistics: layer norms that are not the identity
        for ln in (block.ln1, block.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.2, 0.2)
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        y = block(x)
    test_dir = os.path.join(out_dir, "test_transformer_block")
    data_dir = os.path.join(test_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    model_path = os.path.join(test_dir, "model.onnx")
    torch.onnx.export(block, (x,), model_path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    onnx.checker.check_model(onnx.load(model_path))
    for name, value in (("input_0.pb", x), ("output_0.pb", y)):
        tensor = numpy_helper.from_array(value.numpy().astype(np.float32), "x" if name.startswith("in") else "y")
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(tensor.SerializeToString())
    ops = sorted({n.op_type for n in onnx.load(model_path).graph.node})
    print(f"{model_path}: {len(onnx.load(model_path).graph.node)} nodes, ops {' '.join(ops)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/onnx/pytorch")
