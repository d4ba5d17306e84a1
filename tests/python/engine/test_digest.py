"""A checkpoint's SHA-256 is hashed beside its write (engine/digest.py): the same digest
as ``hashlib``'s at every size, and a large checkpoint's sidecar still names its
tensors file's own hash, so a flipped byte is refused."""

from __future__ import annotations

import hashlib
import json
import os

import engine_factories as f
import pytest

from nnx_lab import CheckpointCorruptError, NNCheckpoint
from nnx_lab.engine.digest import THREAD_MIN_BYTES, Digest


@pytest.mark.parametrize(
    "size", [0, 2047, 2048, THREAD_MIN_BYTES - 1, THREAD_MIN_BYTES, 3 * THREAD_MIN_BYTES + 5]
)
def test_the_digest_is_sha256_below_and_above_the_thread_threshold(size):
    data = os.urandom(size)
    digest = Digest(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()  # read twice, same


def test_a_large_checkpoint_names_its_files_hash_and_a_flipped_byte_is_refused(runs_root):
    model = f.model(net={"hidden_dims": [512, 256]})  # weights + Adam moments: ~1.8 MB
    run = model.train(f.train_params(runs_root, n_epochs=1))
    folder = run.run_dir / "checkpoints"
    sidecar = json.loads((folder / "last.json").read_text())
    tensors = folder / sidecar["tensors_file"]
    data = tensors.read_bytes()
    assert len(data) >= THREAD_MIN_BYTES  # hashed on the writer's other thread
    assert sidecar["sha256"] == hashlib.sha256(data).hexdigest()
    NNCheckpoint.load(run.id, runs_root=runs_root)  # loads as written
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x01
    tensors.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointCorruptError, match="does not match"):
        NNCheckpoint.load(run.id, runs_root=runs_root)
