"""frugal: train deep nets with sublinear memory (docs/guide/python.md).

Model(config, defines={}) plans, trains, loads, saves and predicts;
import_onnx and import_mxnet make a Model of another framework's;
export_onnx(model, path) writes ONNX; frugal's errors are frugal.Error.
"""
import os

# As the frugal command sets it for itself: idle OpenMP threads sleep rather
# than spin beside the engine's workers. libgomp reads it once, when the
# extension below loads it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ._frugal import Error, Model, export_onnx, import_mxnet, import_onnx, read_mxnet_params  # noqa: E402

__all__ = ["Error", "Model", "export_onnx", "import_mxnet", "import_onnx", "read_mxnet_params"]
