"""Issue 29: NNx's phase checkpoints (FIRST, Q1, Q2, Q3) and ``run.checkpoints()``."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch

from nnx_lab import Callback, Checkpoints, ConfigError, NNCheckpoint, NNModel, NNRun, NNTrainParams
from nnx_lab.runs import CheckpointFileError, SidecarFile, check_shape, parse_json


class _Weights(Callback):
    """The network's weights at the end of each epoch, as training left them."""

    def __init__(self) -> None:
        self.at: dict[int, dict[str, torch.Tensor]] = {}

    def on_epoch_end(self, ctx) -> None:
        self.at[ctx.epoch] = {k: v.detach().clone() for k, v in ctx.model.net.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _sidecar(path):
    return check_shape(parse_json(path.read_bytes(), path), SidecarFile, path, CheckpointFileError)


def _epochs(run) -> list[int | None]:
    return [None if c is None else c.epoch for c in run.checkpoints()]


def test_an_eight_epoch_run_keeps_the_first_epoch_and_each_quarter(runs_root):
    weights = _Weights()
    run = f.model().train(
        f.train_params(runs_root, n_epochs=8, checkpoint_every_s=3600.0), callbacks=[weights]
    )
    ckpts = run.checkpoints()
    assert [c.type for c in ckpts] == [
        Checkpoints.FIRST,
        Checkpoints.Q1,
        Checkpoints.Q2,
        Checkpoints.Q3,
        Checkpoints.LAST,
    ]
    # the end of epoch 1, then of epochs 8/4, 8/2 and 3*8/4; LAST the end of the run
    assert [c.epoch for c in ckpts] == [1, 2, 4, 6, 8]
    for c in ckpts:
        assert _same(c.model_state, weights.at[c.epoch]), c.type
    assert not _same(ckpts[0].model_state, ckpts[-1].model_state)
    # each is a committed safetensors checkpoint, read back by the torch-free runs layer
    for phase in ("first", "q1", "q2", "q3"):
        sidecar = run.run_dir / "checkpoints" / f"{phase}.json"
        doc = _sidecar(sidecar)
        assert doc.type == phase
        assert (sidecar.parent / doc.tensors_file).suffix == ".safetensors"
        assert not doc.weights_only  # it carries the training state: resumable
    # a reloaded run lists the same, and each loads by its type
    again = NNRun.load(run.id, runs_root)
    assert _epochs(again) == [1, 2, 4, 6, 8]
    assert _epochs(NNRun.load(run.id, runs_root)) == [c.epoch for c in run.checkpoints(runs_root)]
    q2 = NNCheckpoint.load(run, Checkpoints.Q2)
    assert _same(q2.model_state, weights.at[4])
    model = NNModel.from_checkpoint(NNCheckpoint.load(run.id, "q3", runs_root))
    assert _same(model.net.state_dict(), weights.at[6])


@pytest.mark.parametrize(
    ("n_epochs", "expected"),
    [
        (1, [1, None, None, None, 1]),  # FIRST is also LAST: no quarter after it
        (2, [1, None, None, None, 2]),  # quarters 2 and 3 fall on epoch 1: FIRST holds it
        (3, [1, None, None, 2, 3]),  # Q3 = floor(3 * 3 / 4) = 2
        (4, [1, None, 2, 3, 4]),
        (7, [1, None, 3, 5, 7]),  # Q1 = floor(7 / 4) = 1 is FIRST
    ],
)
def test_a_short_run_has_the_phases_its_epochs_allow(runs_root, n_epochs, expected):
    run = f.model().train(f.train_params(runs_root, n_epochs=n_epochs, checkpoint_every_s=0))
    assert _epochs(run) == expected
    folder = run.run_dir / "checkpoints"
    written = {p.stem for p in folder.glob("*.json")}
    assert written == {"last", "best"} | {
        name for name, e in zip(("first", "q1", "q2", "q3"), expected, strict=False) if e
    }
    with pytest.raises(FileNotFoundError, match="has no Q1 checkpoint"):
        NNCheckpoint.load(run, Checkpoints.Q1)


def test_a_run_resumes_from_a_phase_checkpoint(runs_root):
    source = f.model().train(f.train_params(runs_root, n_epochs=4))
    first = NNCheckpoint.load(source, Checkpoints.FIRST)
    resumed = f.model().train(
        f.train_params(
            runs_root,
            n_epochs=1,
            resume_from_run_id=source.id,
            resume_from_checkpoint="first",
        )
    )
    assert resumed.parent_run_id == source.id
    assert resumed.config["train"]["resume"]["checkpoint"] == "first"
    # the stateful resume continued from the end of epoch 1 (its history inherited):
    # epoch 2 is its first, so its own FIRST
    assert [e["epoch"] for e in resumed.epochs] == [1, 2]
    assert _epochs(resumed) == [2, None, None, None, 2]
    weights_only = f.model().train(
        f.train_params(
            runs_root,
            n_epochs=1,
            resume_from_run_id=source.id,
            resume_from_checkpoint="q2",
            resume_mode="weights_only",
        )
    )
    assert weights_only.parent_run_id == source.id
    assert first.epoch == 1


def test_a_damaged_phase_checkpoint_is_refused_naming_its_file(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=4))
    sidecar = run.run_dir / "checkpoints" / "q2.json"
    doc = _sidecar(sidecar)
    tensors = sidecar.parent / doc.tensors_file
    tensors.write_bytes(tensors.read_bytes()[:-8])
    with pytest.raises(Exception, match=doc.tensors_file[:12]):
        run.checkpoints()


def test_save_phase_checkpoints_false_writes_last_and_best_only(runs_root):
    params = f.train_params(runs_root, n_epochs=4, save_phase_checkpoints=False)
    run = f.model().train(params)
    assert _epochs(run) == [None, None, None, None, 4]
    assert {p.stem for p in (run.run_dir / "checkpoints").glob("*.json")} == {"last", "best"}
    # a knob like checkpoint_every_s: the same result, so the same run id
    assert f.model().expected_run_id(params) == f.model().expected_run_id(
        params.replace(save_phase_checkpoints=True)
    )
    plain = NNTrainParams(n_epochs=4, save_phase_checkpoints=False)
    assert NNTrainParams.from_state(plain.state()) == plain
    with pytest.raises(ConfigError, match="save_phase_checkpoints"):
        NNTrainParams(save_phase_checkpoints="no")
