# The Python module against the command-line tool: the same plan, the same
# predictions from the same checkpoint, training that callbacks see and stop,
# and frugal's errors as frugal.Error. Run by ctest (`python`) with
# PYTHONPATH=build/python, FRUGAL (the CLI) and FRUGAL_SOURCE_DIR set.
import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import frugal

SOURCE = os.environ.get("FRUGAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("FRUGAL", os.path.join(SOURCE, "build", "frugal"))
MLP = "models/mlp/fashion_mnist.prototxt"
SMALL = {"hidden": 32, "batch": 32}  # trains 20 batches in well under a second


@pytest.fixture(autouse=True)
def in_source_dir(monkeypatch):
    monkeypatch.chdir(SOURCE)  # the configs name their data from here


def cli(*args):
    return subprocess.run([CLI, *args], check=True, capture_output=True, text=True).stdout


def samples(n, seed=0):
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    os.chdir(SOURCE)
    model = frugal.Model(MLP, defines=SMALL)
    events = []
    acc = model.train(max_iters=20, checkpoint_dir=str(tmp_path_factory.mktemp("ck")), callbacks=[events.append],
                      quiet=True)
    return model, events, acc


def test_plan_is_the_clis():
    for memory in ["share", "sqrt", "budget=3MiB"]:
        got = frugal.Model(MLP, defines=SMALL).plan(memory)
        want = json.loads(cli("plan", "--config", MLP, "--define", "hidden=32", "--define", "batch=32",
                              "--memory", memory, "--json"))
        for d in (got, want):
            d.pop("plan_ms")
        assert got == want, memory


def test_training_reports_every_window_and_the_epoch(trained):
    model, events, acc = trained
    windows = [e for e in events if e["event"] == "window"]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert len(windows) >= 1 and len(epochs) == 1
    assert epochs[0]["iterations"] == 20
    assert "train_accuracy" in windows[-1] and "val_accuracy" in epochs[0]
    assert acc == pytest.approx(epochs[0]["val_accuracy"])
    assert 0.3 < acc <= 1  # 20 batches of Fashion-MNIST learn something
    assert model.checkpoint.endswith("ckpt-%010d.frugal" % 20)


def test_predictions_are_the_clis_bits(trained, tmp_path):
    model, _, _ = trained
    x = samples(70)  # two batches of 32 and a partial one
    y = model.predict(x)
    assert y.shape == (70, 10) and y.dtype == np.float32
    np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)
    np.save(tmp_path / "x.npy", x)
    cli("predict", "--checkpoint", model.checkpoint, "--input", str(tmp_path / "x.npy"), "--out",
        str(tmp_path / "y.npy"))
    assert np.array_equal(y, np.load(tmp_path / "y.npy"))


def test_save_and_load_keep_the_predictions(trained, tmp_path):
    model, _, _ = trained
    model.save(str(tmp_path / "m.frugal"))
    other = frugal.Model(MLP, defines=SMALL)
    other.load(str(tmp_path / "m.frugal"))
    x = samples(5, seed=1)
    assert np.array_equal(other.predict(x), model.predict(x))
    assert other.outputs == ["prob"]


def test_a_callback_stops_the_run_at_its_batch(tmp_path):
    model = frugal.Model(MLP, defines=dict(SMALL, epochs=1))
    seen = []

    def stop_at_second_window(e):  # a window every 100 batches (solver.display)
        seen.append(e)
        return e["event"] == "window" and e["iterations"] >= 200

    model.train(callbacks=[stop_at_second_window], checkpoint_dir=str(tmp_path), quiet=True)
    # The loop runs one batch ahead of the metrics: batch 201 was under way
    # when the window of 200 came, and is the last, in a window of its own.
    assert [e["iterations"] for e in seen if e["event"] == "window"] == [100, 200, 201]
    assert [e["event"] for e in seen if e["event"] != "window"] == []  # no epoch's end
    assert model.checkpoint.endswith("ckpt-%010d.frugal" % 201)  # saved where it stopped


def test_training_continues_from_the_checkpoint(tmp_path):
    model = frugal.Model(MLP, defines=SMALL)
    model.train(max_iters=10, checkpoint_dir=str(tmp_path), quiet=True)
    model.train(max_iters=15, checkpoint_dir=str(tmp_path), quiet=True)
    assert model.checkpoint.endswith("ckpt-%010d.frugal" % 15)


def test_a_callbacks_exception_is_raised_after_the_run_stops(tmp_path):
    model = frugal.Model(MLP, defines=SMALL)

    def fail(e):
        raise ValueError("from the callback")

    with pytest.raises(ValueError, match="from the callback"):
        model.train(max_iters=1000, callbacks=[fail], checkpoint_dir=str(tmp_path), quiet=True)
    assert model.checkpoint.endswith("ckpt-%010d.frugal" % 101)  # stopped at the first window, and saved


def test_training_releases_the_interpreter(tmp_path):
    model = frugal.Model(MLP, defines=SMALL)
    counted, done = [0], threading.Event()

    def count():
        while not done.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        model.train(max_iters=40, checkpoint_dir=str(tmp_path), quiet=True)
    finally:
        done.set()
        t.join()
    assert counted[0] > 1000


def test_export_onnx_writes_the_model(trained, tmp_path):
    onnx = pytest.importorskip("onnx", reason="Debian's python3-onnx is not installed")
    model, _, _ = trained
    frugal.export_onnx(model, str(tmp_path / "m.onnx"))
    m = onnx.load(str(tmp_path / "m.onnx"))
    assert [o.name for o in m.graph.output] == ["prob"]


def test_errors_are_frugal_errors_with_the_clis_line(trained, tmp_path):
    model, _, _ = trained
    with pytest.raises(frugal.Error, match="nothing.prototxt"):
        frugal.Model("models/nothing.prototxt")
    with pytest.raises(frugal.Error, match=r"samples of shape \(3, 28, 28\).*\(N, 1, 28, 28\)"):
        model.predict(np.zeros((3, 28, 28), np.float32))
    fresh = frugal.Model(MLP, defines=SMALL)
    with pytest.raises(frugal.Error, match="train\\(\\) it or load\\(\\) a checkpoint first"):
        fresh.predict(samples(1))
    with pytest.raises(frugal.Error, match="nothing to save"):
        fresh.save(str(tmp_path / "x.frugal"))
    with pytest.raises(frugal.Error, match="budget"):
        fresh.plan("budget=1KiB")
    with pytest.raises(frugal.Error):
        fresh.load(str(tmp_path))  # a folder without checkpoints


def example():
    """python/examples/fashion_mnist.py as a module."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("fashion_mnist", os.path.join(SOURCE, "python/examples/fashion_mnist.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_arrays_train_to_the_bits_of_the_configs_data(tmp_path):
    # The example's arrays are the IDX reader's values (pixel * (1/255) in
    # float32), in the same epoch order: the same training, bit for bit.
    ex = example()
    from_config = frugal.Model(MLP, defines=SMALL)
    acc_config = from_config.train(max_iters=30, checkpoint_dir=str(tmp_path / "a"), quiet=True)
    from_arrays = frugal.Model(MLP, defines=SMALL)
    acc_arrays = from_arrays.train(max_iters=30, checkpoint_dir=str(tmp_path / "b"), quiet=True,
                                   data=ex.load("train"), val_data=ex.load("t10k"))
    assert acc_arrays == acc_config
    x = samples(40, seed=2)
    assert np.array_equal(from_arrays.predict(x), from_config.predict(x))


def test_arrays_of_another_shape_are_named(tmp_path):
    model = frugal.Model(MLP, defines=SMALL)
    x, y = np.zeros((10, 28, 28), np.float32), np.zeros(10, np.float32)
    with pytest.raises(frugal.Error, match=r"data's samples are \(10, 28, 28\) but .* takes \(N, 1, 28, 28\)"):
        model.train(data=(x, y), checkpoint_dir=str(tmp_path))
    with pytest.raises(frugal.Error, match=r"data's labels are \(9,\) for 10 samples; .* takes \(10,\)"):
        model.train(data=(x[:, None], y[:9]), checkpoint_dir=str(tmp_path))
    with pytest.raises(frugal.Error, match="val_data without data"):
        model.train(val_data=(x[:, None], y), checkpoint_dir=str(tmp_path))


def test_an_iterable_of_batches_trains_to_the_bits_of_its_arrays(tmp_path):
    # data= an iterable of (samples, labels) batches with len(), here a list
    # walked again at each epoch: the arrays' batches in their order (the
    # config's shuffle off) train to the same bits, the last short batch
    # (4 of 32 rows) wrapping to the epoch's first rows as the arrays' does.
    config = tmp_path / "mlp.prototxt"
    config.write_text(open(MLP).read().replace("  batch_size: ${batch}", "  shuffle: false\n  batch_size: ${batch}"))
    x = samples(100, seed=4)
    y = (np.arange(100) % 10).astype(np.float32)
    batches = [(x[k:k + 32], y[k:k + 32]) for k in range(0, 100, 32)]
    from_arrays, from_batches = frugal.Model(str(config), defines=SMALL), frugal.Model(str(config), defines=SMALL)
    acc_arrays = from_arrays.train(epochs=2, checkpoint_dir=str(tmp_path / "a"), quiet=True, data=(x, y))
    acc_batches = from_batches.train(epochs=2, checkpoint_dir=str(tmp_path / "b"), quiet=True, data=batches)
    assert acc_batches == acc_arrays
    assert np.array_equal(from_batches.predict(x), from_arrays.predict(x))
    model = frugal.Model(str(config), defines=SMALL)
    with pytest.raises(frugal.Error, match="an iterable without len"):
        model.train(data=iter(batches), checkpoint_dir=str(tmp_path / "c"))
    with pytest.raises(frugal.Error, match=r"data: batch 1's samples are \(40, 1, 28, 28\) but .* with 1 <= N <= 32"):
        model.train(data=[batches[0], (samples(40), np.zeros(40, np.float32))], checkpoint_dir=str(tmp_path / "d"))
    with pytest.raises(frugal.Error, match="data: batch 0: .*ZeroDivisionError"):
        model.train(data=Broken(), checkpoint_dir=str(tmp_path / "e"))


class Broken:
    """Batches whose iteration raises."""
    def __len__(self):
        return 3

    def __iter__(self):
        yield 1 / 0


def test_pip_installs_a_package_that_plans_as_this_one(tmp_path):
    # `pip install --no-build-isolation --no-index .` into a venv of Debian's
    # python3 (its numpy and setuptools), offline, from the build folder these
    # tests import from (FRUGAL_BUILD_DIR): the installed package, not
    # PYTHONPATH's, imports and plans as this one does.
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(frugal.__file__))))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["FRUGAL_BUILD_DIR"] = build
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", SOURCE],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    script = "import frugal; print(frugal.__file__); print(frugal.Model(%r).plan('sqrt')['arena_bytes'])" % (
        os.path.join(SOURCE, MLP))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    where, arena = run.stdout.split()
    assert where.startswith(str(venv))
    assert int(arena) == frugal.Model(os.path.join(SOURCE, MLP)).plan("sqrt")["arena_bytes"]


def test_the_timeline_peaks_at_the_plans_live_peak():
    model = frugal.Model(MLP)
    for memory in ["share", "sqrt"]:
        t, plan = model.timeline(memory), model.plan(memory)
        live = t["forward"] + t["recomputed"] + t["gradients"] + t["workspace"]
        assert t["peak_bytes"] == plan["lower_bound_bytes"] == live.max()
        assert 0 < t["backward_step"] < t["num_steps"]
    assert model.timeline("sqrt")["peak_bytes"] < model.timeline("share")["peak_bytes"]


def test_the_example_trains_from_numpy():
    _, acc, history = example().train(max_iters=30)
    assert history[-1]["event"] == "epoch" and history[-1]["iterations"] == 30
    assert acc > 0.5


def test_the_example_plots_the_timeline(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (Debian's python3-matplotlib)")
    ex = example()
    ex.plot(frugal.Model(MLP, defines=SMALL), str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["cnn", "lstm", "rnn", "fused", "gluon", "lrn", "fusedcell"])
def test_an_mxnet_model_imports_and_predicts_what_mxnet_computed(name, tmp_path):
    # tests/mxnet/NAME-*: models exported by MXNet 1.9.1 (a convolutional
    # net; MXNet's LSTM example, two layers unrolled; mx.rnn's LSTMCells
    # unrolled; the fused RNN of mx.sym.RNN, gluon.rnn.LSTM and
    # mx.rnn.FusedRNNCell; LRN), each
    # with an input and the output MXNet computed for it
    # (tools/mxnet/make_test_files.py). The sequence models' outputs are
    # time-major rows (position by position), compared as MXNet wrote them.
    io = frugal.read_mxnet_params(f"tests/mxnet/{name}-io.params")
    model = frugal.import_mxnet(f"tests/mxnet/{name}-symbol.json", f"tests/mxnet/{name}-0000.params",
                                str(tmp_path / name), data_shape=list(io["data"].shape))
    assert model.checkpoint == str(tmp_path / (name + ".frugal"))
    y = model.predict(io["data"])
    np.testing.assert_allclose(y.reshape(io["output"].shape), io["output"], rtol=1e-5, atol=1e-6)


def test_an_exported_model_imports_back_to_its_predictions(trained, tmp_path):
    model, _, _ = trained
    frugal.export_onnx(model, str(tmp_path / "m.onnx"))
    back = frugal.import_onnx(str(tmp_path / "m.onnx"), str(tmp_path / "back"), batch=32)
    x = samples(33, seed=3)
    np.testing.assert_allclose(back.predict(x), model.predict(x), rtol=1e-6, atol=1e-7)
    with pytest.raises(frugal.Error, match="nothing.onnx"):
        frugal.import_onnx(str(tmp_path / "nothing.onnx"), str(tmp_path / "x"))


def test_ctrl_c_stops_training_with_a_checkpoint_and_raises_keyboard_interrupt(tmp_path):
    script = f"""
import sys, frugal
model = frugal.Model({MLP!r}, defines={SMALL!r})
def started(e):
    print("window", e["iterations"], flush=True)
try:
    model.train(epochs=50, checkpoint_dir={str(tmp_path)!r}, callbacks=[started], quiet=True)
    print("finished")
except KeyboardInterrupt:
    print("interrupted", model.checkpoint)
"""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(frugal.__file__))))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env, cwd=SOURCE)
    first = child.stdout.readline()
    assert first.startswith("window"), first
    child.send_signal(signal.SIGINT)
    rest = child.communicate(timeout=60)[0].splitlines()
    assert child.returncode == 0 and rest[-1].startswith("interrupted "), rest
    assert os.path.exists(rest[-1].split()[1])  # the checkpoint where it stopped


def test_a_limit_plans_the_process_without_data_not_prepared():
    # As `frugal plan --memory limit=...`: data that does not open is a
    # warning, and the process is planned without it.
    model = frugal.Model("models/gpt/gpt.prototxt", defines={"train": "/nonexistent.txt", "val": "/nonexistent.txt"})
    plan = model.plan("limit=2GiB")
    assert plan["process"]["limit_bytes"] == 2 << 30
    assert 0 < plan["process"]["total_bytes"] <= 2 << 30
