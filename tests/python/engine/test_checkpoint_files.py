"""A checkpoint from someone else (issue 20, section 2): every sidecar field and every
lie of a safetensors header is refused with one CheckpointFileError (a SchemaError and
the CheckpointCorruptError callers always caught) naming the file and the field, before
any tensor is decoded. Each forgery recomputes the checksums, as a careful forger would,
so that the shape (not the checksum) is what refuses it."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct

import engine_factories as f
import hostile_factories as h
import pytest

from nnx_lab import CheckpointCorruptError, Checkpoints, NNCheckpoint, NNModel
from nnx_lab.engine import checkpoint as checkpoint_module
from nnx_lab.engine.checkpoint import _sidecar_digest
from nnx_lab.runs import CheckpointFileError, SchemaError


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoint-files")
    run = f.model().train(f.train_params(root, n_epochs=2, checkpoint_every_s=0))
    return run


@pytest.fixture
def run(trained_once, tmp_path):
    """A private copy of the trained run: (runs root, run id, its sidecar)."""
    shutil.copytree(trained_once.run_dir, tmp_path / trained_once.id)
    return tmp_path, trained_once.id, tmp_path / trained_once.id / "checkpoints" / "last.json"


def _load(root, run_id):
    return lambda path: NNCheckpoint.load(run_id, runs_root=root)


def _forge_sidecar(path, change) -> None:
    sidecar = json.loads(path.read_text())
    change(sidecar)
    sidecar["sidecar_sha256"] = _sidecar_digest(sidecar)
    path.write_text(json.dumps(sidecar, allow_nan=True))


def _set(dotted: str, value):
    parts = dotted.split(".")

    def change(d):
        for p in parts[:-1]:
            d = d[int(p)] if isinstance(d, list) else d[p]
        d[parts[-1]] = value

    return change


STATE_STEP = "training_state.optimizer.state.__dict__.0.1.step"

SIDECAR_CASES = {
    "epoch negative": (_set("epoch", -1), "epoch", ">= 0"),
    "step a string": (_set("step", "16"), "step", "got `str`"),
    "epoch Infinity": (_set("epoch", float("inf")), "epoch", "finite"),
    "world_size 0": (_set("world_size", 0), "world_size", ">= 1"),
    "run_id 5": (_set("run_id", 5), "run_id", "got `int`"),
    "sha256 not hex": (_set("sha256", "xyz"), "sha256", "regex"),
    "type unknown": (_set("type", "middle"), "type", "middle"),
    "format 2": (_set("format", 2), "format", "2"),
    "net_params a string": (_set("net_params", "relu"), "net_params", "got `str`"),
    "a 70-bit width": (_set("net_params.hidden_dims", [2**70]), "net_params.hidden_dims[0]", "64"),
    "an unknown field": (_set("exec", "os.system"), "exec", "not a field"),
    "tensors_file a path": (_set("tensors_file", "../../x.safetensors"), "tensors_file", "only"),
    "weights_only with a state": (_set("weights_only", True), "weights_only", "weights-only"),
    "a tuple not a list": (
        _set("training_state.optimizer.param_groups.0.betas", {"__tuple__": 0.9}),
        "training_state.optimizer.param_groups[0].betas.__tuple__",
        "a tuple is saved as a list",
    ),
    "an array of objects": (
        _set("training_state.rng.numpy.__tuple__.1.dtype", "|O"),
        "training_state.rng.numpy.__tuple__[1].dtype",
        "not a NumPy dtype",
    ),
    "an array of a dtype NumPy lacks": (
        _set("training_state.rng.numpy.__tuple__.1.dtype", "<f1"),
        "training_state.rng.numpy.__tuple__[1].dtype",
        "not a NumPy dtype",
    ),
    "a NumPy scalar out of its range": (
        _set("training_state.best_value", {"__npscalar__": 300, "dtype": "|u1"}),
        "training_state.best_value.__npscalar__",
        "not a value of dtype u1",
    ),
    "a dict not of pairs": (
        _set("training_state.optimizer.state.__dict__", [[0]]),
        "training_state.optimizer.state.__dict__",
        "[key, value] pairs",
    ),
    "a reference beside other keys": (
        _set(STATE_STEP, {"__tensor__": "state.x", "call": "os.system"}),
        "training_state.optimizer.state.__dict__[0][1].step.__tensor__",
        "holds only",
    ),
}


@pytest.mark.parametrize("case", SIDECAR_CASES, ids=list(SIDECAR_CASES))
def test_a_hostile_sidecar_field_is_named(run, case):
    root, run_id, sidecar = run
    change, field, says = SIDECAR_CASES[case]
    _forge_sidecar(sidecar, change)
    err = h.refused(_load(root, run_id), sidecar, CheckpointCorruptError, field)
    assert isinstance(err, CheckpointFileError)
    assert says in str(err)


def test_a_reference_to_a_tensor_the_file_does_not_hold_is_refused_before_decoding(
    run, monkeypatch
):
    root, run_id, sidecar = run
    _forge_sidecar(sidecar, _set(STATE_STEP, {"__tensor__": "state.nowhere"}))
    monkeypatch.setattr(checkpoint_module, "st_load", _never)
    err = h.refused(_load(root, run_id), sidecar, CheckpointCorruptError)
    assert err.field.startswith("training_state.optimizer.state")
    assert "does not hold" in str(err)


@pytest.mark.parametrize("data", h.HOSTILE_BYTES, ids=list(h.HOSTILE_BYTES))
def test_hostile_sidecar_bytes_are_one_checkpoint_error(run, data):
    root, run_id, sidecar = run
    sidecar.write_bytes(h.HOSTILE_BYTES[data])
    err = h.refused(_load(root, run_id), sidecar, CheckpointCorruptError, "")
    assert f"{sidecar} is corrupted or truncated" in str(err) or "not a checkpoint" in str(err)


def test_a_100_mb_sidecar_and_a_pipe_are_refused_without_reading(run):
    root, run_id, sidecar = run
    sidecar.unlink()
    h.refused_without_reading(_load(root, run_id), h.a_100_mb_file(sidecar), CheckpointCorruptError)
    sidecar.unlink()
    h.a_pipe(sidecar)
    with pytest.raises(FileNotFoundError):  # a pipe is not a checkpoint: none was written
        NNCheckpoint.load(run_id, runs_root=root)


# -- the tensors file's header -----------------------------------------------------------------
def _never(*args, **kwargs):
    raise AssertionError("the safetensors parser was reached")


def _forge_tensors(sidecar, change=None, *, raw=None) -> None:
    """Rewrite the tensors file's header through ``change(header)`` (or replace the whole
    file by ``raw(payload)``), then commit it as a forger would: new SHA-256s."""
    name = json.loads(sidecar.read_text())["tensors_file"]
    path = sidecar.parent / name
    payload = path.read_bytes()
    if raw is not None:
        payload = raw(payload)
    else:
        size = struct.unpack("<Q", payload[:8])[0]
        header = json.loads(payload[8 : 8 + size])
        change(header)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        payload = struct.pack("<Q", len(text)) + text + payload[8 + size :]
    path.write_bytes(payload)
    _forge_sidecar(sidecar, _set("sha256", hashlib.sha256(payload).hexdigest()))


def _tensor(header, index):
    """The name of the ``index``-th tensor by byte offset."""
    names = sorted(
        (k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"]
    )
    return names[index]


def _shift(header):
    second = header[_tensor(header, 1)]
    second["data_offsets"] = [second["data_offsets"][0] - 4, second["data_offsets"][1] - 4]


def _widen(header):
    header[_tensor(header, 0)]["dtype"] = "F64"


def _reshape(header):
    first = header[_tensor(header, 0)]
    first["shape"] = [first["shape"][0], first["shape"][1] + 1]


def _rename(header):
    header["evil"] = header.pop(_tensor(header, 0))


HEADER_CASES = {
    "a length past the end": (
        None,
        lambda p: struct.pack("<Q", 1 << 40) + p[8:],
        "header",
        "-byte header in a file of",
    ),
    "shorter than a header": (None, lambda p: p[:5], "", "shorter than"),
    "a header that is not JSON": (
        None,
        lambda p: p[:8] + b"\x00" * (len(p) - 8),
        "header",
        "not valid JSON",
    ),
    "overlapping ranges": (_shift, None, "data_offsets", "overlaps"),
    "a dtype twice as wide": (_widen, None, "data_offsets", "bytes; shape"),
    "a shape that does not fit its bytes": (_reshape, None, "data_offsets", "bytes; shape"),
    "a dtype nnx_lab never writes": (
        lambda hd: hd[_tensor(hd, 0)].update(dtype="I128"),
        None,
        "dtype",
        "I128",
    ),
    "a range of one number": (
        lambda hd: hd[_tensor(hd, 0)].update(data_offsets=[0]),
        None,
        "data_offsets",
        "length >= 2",
    ),
    "a tensor under another name": (_rename, None, "header.evil", "model.* or state.*"),
    "metadata that is not text": (
        lambda hd: hd.update(__metadata__={"a": 1}),
        None,
        "header",
        "got `int`",
    ),
    "bytes the header does not describe": (
        None,
        lambda p: p + b"\x00" * 16,
        "header",
        "describes",
    ),
}


@pytest.mark.parametrize("case", HEADER_CASES, ids=list(HEADER_CASES))
def test_a_lying_safetensors_header_is_refused_before_any_tensor(run, case, monkeypatch):
    root, run_id, sidecar = run
    change, raw, field, says = HEADER_CASES[case]
    _forge_tensors(sidecar, change, raw=raw)
    monkeypatch.setattr(checkpoint_module, "st_load", _never)
    with pytest.raises(CheckpointCorruptError) as info:
        NNCheckpoint.load(run_id, runs_root=root)
    err = info.value
    assert isinstance(err, SchemaError)
    assert err.path.suffix == ".safetensors"
    assert field in err.field
    assert says in str(err)


def test_a_transposed_weight_is_refused_by_from_checkpoint_naming_the_tensor(run):
    root, run_id, sidecar = run

    def transpose(header):
        first = header[_tensor(header, 0)]
        first["shape"] = list(reversed(first["shape"]))  # the same bytes, another shape

    _forge_tensors(sidecar, transpose)
    ckpt = NNCheckpoint.load(run_id, runs_root=root)  # self-consistent: it loads
    with pytest.raises(CheckpointCorruptError) as info:
        NNModel.from_checkpoint(ckpt)
    assert isinstance(info.value, SchemaError)
    assert info.value.field.endswith(".shape")
    assert "the network its recipe builds holds" in str(info.value)


def test_the_untouched_checkpoint_still_loads_and_builds(run):
    root, run_id, _ = run
    for type_ in (Checkpoints.LAST, Checkpoints.BEST):
        ckpt = NNCheckpoint.load(run_id, type_, runs_root=root)
        NNModel.from_checkpoint(ckpt)
        assert ckpt.training_state() is not None
