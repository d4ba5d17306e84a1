"""The run format tried as an adversary and as a careless user would try it.

One test per finding of the hardening review: ids and paths that try to leave the runs
root, tampered sidecars and logs, loaders that hide bad batches, NaN data, killed and
racing writers, and a run directory deleted under its writer. Each test asserts the
refusal or the clean, truthful state, and that nothing outside the runs root was read,
written or deleted. The kill-at-random and two-process tests run real subprocesses.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import engine_factories as f
import pytest
import torch
import yaml
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from nnx_lab import (
    CheckpointCorruptError,
    Checkpoints,
    ConfigError,
    DataError,
    Losses,
    NNCheckpoint,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    ResumeError,
    list_runs,
)
from nnx_lab.engine.checkpoint import _sidecar_digest
from nnx_lab.errors import RunDirectoryError
from nnx_lab.runs import LogDamagedError, RunRecordError

ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its SHA-256 (to prove it was not touched)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def outside(tmp_path):
    """A folder beside the runs root, holding a victim file and a copy of a real run."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "victim.txt").write_text("do not delete me\n")
    return d


@pytest.fixture
def trained(tmp_path):
    """A finished 2-epoch run under ``tmp_path/runs``."""
    root = tmp_path / "runs"
    model = f.model()
    run = model.train(f.train_params(root, n_epochs=2, checkpoint_every_s=0))
    return root, model, run


def _rewrite_sidecar(path: Path, change) -> None:
    """Edit a sidecar and recompute its checksum, as a careful forger would."""
    sidecar = json.loads(path.read_text())
    change(sidecar)
    if "sidecar_sha256" in sidecar:
        sidecar["sidecar_sha256"] = _sidecar_digest(sidecar)
    path.write_text(json.dumps(sidecar))


# -- paths and ids: nothing leaves the runs root -----------------------------------------
@pytest.mark.parametrize("bad", ["../outside/x", "/abs/dir", "..", "", "a" * 300, 123, None])
def test_ids_that_are_not_run_ids_are_refused_without_touching_anything(trained, outside, bad):
    root, _, _ = trained
    before = snapshot(outside)
    for call in (
        lambda: NNRun.load(id=bad, runs_root=root),
        lambda: NNCheckpoint.load(run=bad, runs_root=root),
        lambda: NNCheckpoint.load_with_training_state(run=bad, runs_root=root),
    ):
        with pytest.raises(ValueError, match="not a run id"):
            call()
    assert snapshot(outside) == before
    assert not list(outside.rglob(".lock"))


@pytest.mark.parametrize("bad", ["../outside/x", "/abs/dir", "..", "", "A" * 32, 123])
def test_a_resume_from_a_non_id_is_refused_where_it_is_typed(bad):
    with pytest.raises(ConfigError, match="resume_from_run_id"):
        NNTrainParams(resume_from_run_id=bad)


def test_a_run_folder_that_links_outside_the_root_is_refused(trained, outside):
    root, _, run = trained
    elsewhere = outside / "moved"
    shutil.move(str(run.run_dir), elsewhere)
    os.symlink(elsewhere, run.run_dir)
    before = snapshot(outside)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        NNRun.load(run.id, runs_root=root)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        NNCheckpoint.load(run=run.id, runs_root=root)
    assert snapshot(outside) == before


def test_a_resumed_run_records_a_validated_parent(trained):
    root, _, run = trained
    child = f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))
    assert child.metadata["parent_run_id"] == run.id
    assert child.resume_status["from_run_id"] == run.id


def test_a_tampered_sidecar_never_makes_the_writer_delete_outside_the_run(tmp_path, outside):
    """The writer deletes the tensors file the previous sidecar names: a sidecar pointing
    at ../../victim.txt (checksums recomputed) must not cost the victim its life."""
    victim = outside / "victim.txt"

    class Tamper:
        def on_checkpoint_written(self, event):
            if event.type == "last" and event.epoch == 1:
                rel = os.path.relpath(victim, Path(event.path).parent)
                _rewrite_sidecar(Path(event.path), lambda s: s.update(tensors_file=rel))

    run = f.model().train(
        f.train_params(tmp_path / "runs", n_epochs=3, checkpoint_every_s=0), callbacks=[Tamper()]
    )
    assert run.status.value == "finished"
    assert victim.read_text() == "do not delete me\n"
    ckpt = NNCheckpoint.load(run.id, runs_root=tmp_path / "runs")  # the last write is clean
    assert ckpt.epoch == 3


@pytest.mark.parametrize("name", ["../../outside/victim.txt", "/etc/passwd", "best.json"])
def test_a_sidecar_naming_anything_but_its_own_tensors_file_is_refused(trained, name):
    root, _, run = trained
    _rewrite_sidecar(run.run_dir / "checkpoints/last.json", lambda s: s.update(tensors_file=name))
    with pytest.raises(CheckpointCorruptError, match="may only name a tensors file"):
        NNCheckpoint.load(run.id, runs_root=root)


# -- integrity: nothing loads silently wrong --------------------------------------------
def test_a_sidecar_without_its_checksum_is_corrupt(trained):
    """Deleting the self-checksum once let an edited activation build a tanh network."""
    root, _, run = trained
    path = run.run_dir / "checkpoints/last.json"

    def edit(s):
        s["model_params"]["loss"] = "mean_squared_error"
        del s["sidecar_sha256"]

    _rewrite_sidecar(path, edit)
    with pytest.raises(CheckpointCorruptError, match="no checksum of its own"):
        NNCheckpoint.load(run.id, runs_root=root)


def test_an_edited_recipe_is_refused_even_with_checksums_recomputed(trained):
    root, _, run = trained
    path = run.run_dir / "checkpoints/last.json"
    _rewrite_sidecar(path, lambda s: s["net_params"].update(activation="tanh"))
    with pytest.raises(CheckpointCorruptError, match="recorded"):
        NNCheckpoint.load(run.id, runs_root=root)


def test_a_flipped_weight_byte_is_refused(trained):
    root, _, run = trained
    folder = run.run_dir / "checkpoints"
    sidecar = json.loads((folder / "last.json").read_text())
    tensors = folder / sidecar["tensors_file"]
    data = bytearray(tensors.read_bytes())
    data[-3] ^= 0x7F  # a weight's high byte
    tensors.write_bytes(bytes(data))

    def forge(s):
        s["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
        del s["sidecar_sha256"]

    _rewrite_sidecar(folder / "last.json", forge)
    with pytest.raises(CheckpointCorruptError):
        NNCheckpoint.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError):  # and resume does not continue from it
        f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))


def test_best_copied_over_last_is_refused(trained):
    root, _, run = trained
    folder = run.run_dir / "checkpoints"
    shutil.copy(folder / "best.json", folder / "last.json")
    with pytest.raises(CheckpointCorruptError, match="BEST checkpoint, not LAST"):
        NNCheckpoint.load(run.id, Checkpoints.LAST, runs_root=root)


def test_another_runs_checkpoint_copied_in_is_refused(trained):
    root, _, run = trained
    other = f.model().train(f.train_params(root, n_epochs=1, seed=7))
    src, dst = other.run_dir / "checkpoints", run.run_dir / "checkpoints"
    sidecar = json.loads((src / "last.json").read_text())
    shutil.copy(src / sidecar["tensors_file"], dst / sidecar["tensors_file"])
    shutil.copy(src / "last.json", dst / "last.json")
    with pytest.raises(CheckpointCorruptError, match=f"belongs to run '{other.id}'"):
        NNCheckpoint.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError):
        f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        (b"{not json}\n", 3),
        (b"[1, 2]\n", 3),
        (b'{"event": "step", "step": "three"}\n', 3),
        (b'{"event": "nonsense"}\n', 3),
        (b"\xff\xfe\n", 3),
    ],
)
def test_a_damaged_log_names_the_file_and_the_line(trained, damage, line):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[line - 1] = damage
    log.write_bytes(b"".join(lines))
    with pytest.raises(LogDamagedError, match=rf"metrics\.jsonl, line {line}:") as err:
        NNRun.load(run.id, runs_root=root)
    assert err.value.line == line


def test_a_torn_last_line_is_tolerated(trained):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    with log.open("ab") as fh:
        fh.write(b'{"event": "step", "st')  # the writer died mid-line
    loaded = NNRun.load(run.id, runs_root=root)
    assert len(loaded.idps) == len(run.idps)


def test_a_resume_from_a_damaged_parent_creates_nothing_and_a_retry_works(trained):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    good = log.read_bytes()
    log.write_bytes(good.replace(b"\n", b"\n{oops}\n", 1))
    before = sorted(p.name for p in root.iterdir())
    params = f.train_params(root, n_epochs=1, resume_from_run_id=run.id)
    with pytest.raises(LogDamagedError, match="line 2"):
        f.model().train(params)
    assert sorted(p.name for p in root.iterdir()) == before  # no child directory
    log.write_bytes(good)
    child = f.model().train(params)  # no FileExistsError: nothing was left behind
    assert child.status.value == "finished"


def test_damaged_records_name_their_file(trained):
    root, _, run = trained
    (run.run_dir / "metadata.yaml").write_text("status: [unclosed\n")
    with pytest.raises(RunRecordError, match=r"metadata\.yaml: not valid YAML"):
        NNRun.load(run.id, runs_root=root)
    (run.run_dir / "metadata.yaml").write_text("status: finished\n")
    config = yaml.safe_load((run.run_dir / "run.yaml").read_text())
    config["train"]["n_epochs"] = 99
    (run.run_dir / "run.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(RunRecordError, match="does not hash to the run id"):
        NNRun.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError, match="does not hash to the run id"):
        NNCheckpoint.load(run.id, runs_root=root)


# -- run ids that tell different runs apart ------------------------------------------
def _shuffled(seed: int, **kw):
    X, y, _, _ = f.data()
    return DataLoader(
        TensorDataset(X, y),
        batch_size=32,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        **kw,
    )


def test_loaders_that_differ_in_their_generators_seed_get_different_ids(runs_root):
    a = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1)))
    b = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(2)))
    assert a.id != b.id
    assert a.status.value == b.status.value == "finished"
    sampler = RandomSampler(
        TensorDataset(*f.data()[:2]), generator=torch.Generator().manual_seed(3)
    )
    c = f.model().train(
        f.train_params(
            runs_root,
            n_epochs=1,
            train_loader=DataLoader(sampler.data_source, batch_size=32, sampler=sampler),
        )
    )
    assert c.id not in (a.id, b.id)


def test_a_collate_fn_enters_the_data_identity(runs_root):
    def scaled(batch):
        X, y = torch.utils.data.default_collate(batch)
        return X * 10, y

    plain = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1)))
    scaled_run = f.model().train(
        f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1, collate_fn=scaled))
    )
    assert scaled_run.id != plain.id
    assert scaled_run.config["data"]["train"]["collate_fn"]["name"].endswith("scaled")


def test_an_unreadable_collate_fn_warns_and_data_id_settles_it(runs_root):
    # A callable whose class has no source file nnx_lab could fingerprint.
    Collate = type("Collate", (), {"__call__": lambda self, b: torch.utils.data.default_collate(b)})
    loader = _shuffled(1, collate_fn=Collate())
    with pytest.warns(UserWarning, match="cannot fingerprint the collate_fn"):
        f.model().train(f.train_params(runs_root / "a", n_epochs=1, train_loader=loader))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.model().train(
            f.train_params(runs_root / "b", n_epochs=1, train_loader=loader, data_id="toy-v1")
        )


# -- every check before the run directory; clean failures after it ------------------------
def _batches(*extra):
    X, y, _, _ = f.data(n_train=96)
    good = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 96, 32)]
    return good[:2] + list(extra) + good[2:]


@pytest.mark.parametrize(
    ("bad", "text"),
    [
        (
            (torch.randn(32, 8), torch.full((32,), 7)),
            r"batch 2 of epoch 1's class targets span \[7, 7\]",
        ),
        (
            (torch.randn(32, 5), torch.zeros(32).long()),
            "batch 2 of epoch 1's features have shape (32, 5)",
        ),
        ((torch.randn(32, 8), torch.zeros(32, 1).long()), "y.squeeze(1)"),
        ((torch.randn(32, 8).double(), torch.zeros(32).long()), "dtype torch.float64"),
        ((torch.randn(32, 8), torch.zeros(32).long(), torch.zeros(32)), "not an (X, y) pair"),
    ],
)
def test_a_bad_later_batch_fails_the_run_cleanly_and_a_rerun_is_allowed(runs_root, bad, text):
    params = f.train_params(runs_root, train_loader=_batches(bad), val_loader=None)
    with pytest.raises(DataError, match=re.escape(text) if "[" not in text else text):
        f.model().train(params)
    (run_dir,) = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "failed"
    assert "DataError" in meta["error"]
    with pytest.warns(RuntimeWarning, match="moved to"), pytest.raises(DataError):
        f.model().train(params)  # the same failure again: not FileExistsError
    assert len(list((runs_root / ".replaced").iterdir())) == 1


def test_a_bad_validation_batch_is_named(runs_root):
    _, _, Xv, yv = f.data()
    val = [(Xv[:32], yv[:32]), (Xv[32:], torch.full((32,), 9))]
    with pytest.raises(DataError, match="validation batch 1 after epoch 1"):
        f.model().train(f.train_params(runs_root, val_loader=val))


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: NNOptimParams(max_lr=1e300), "max_lr"),
        (lambda: NNTrainParams(seed=2**64), "seed"),
        (lambda: NNTrainParams(seed=-1), "seed"),
    ],
)
def test_out_of_range_numbers_are_refused_where_they_are_typed(build, field):
    with pytest.raises(ConfigError, match=field):
        build()


def test_a_one_shot_generator_is_refused_before_a_run(runs_root):
    X, y, _, _ = f.data()
    gen = ((X[i : i + 32], y[i : i + 32]) for i in range(0, 256, 32))
    with pytest.raises(DataError, match="one-shot iterator"):
        f.model().train(f.train_params(runs_root, train_loader=gen, val_loader=None))
    assert not runs_root.exists()


def test_a_stateful_resume_with_another_loss_is_refused(trained):
    root, _, run = trained
    for loss in (Losses.MEAN_SQUARED_ERROR, Losses.NEGATIVE_LOG_LIKELIHOOD):
        model = f.model(loss=loss)
        X, _, _, _ = f.data()
        kw = {}
        if loss is Losses.MEAN_SQUARED_ERROR:
            kw = {"train_loader": [(X[:32], torch.zeros(32, 3))], "val_loader": None}
        before = sorted(p.name for p in root.iterdir())
        with pytest.raises(ResumeError, match="resume loss mismatch"):
            model.train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id, **kw))
        assert sorted(p.name for p in root.iterdir()) == before


@pytest.mark.parametrize("where", ["features", "targets"])
def test_nan_data_in_a_later_batch_fails_the_run_naming_the_step(runs_root, where):
    X = torch.randn(160, 8)
    y = X[:, :1] * 2
    if where == "features":
        X[130, 3] = float("nan")  # batch 4 (of 32 rows)
    else:
        y[130, 0] = float("nan")
    batches = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 160, 32)]
    model = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR)
    params = f.train_params(runs_root, n_epochs=2, train_loader=batches, val_loader=None)
    with pytest.raises(
        FloatingPointError, match=r"non-finite training loss at step 5 \(epoch 1, batch 4\)"
    ):
        model.train(params)
    run = NNRun.load(model.last_run.id, runs_root=runs_root)
    assert run.status.value == "failed"
    assert "step 5" in run.error
    opted_out = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR).train(
        params.replace(stop_on_nonfinite=False, runs_root=str(runs_root / "b"))
    )
    assert opted_out.status.value == "finished"


# -- a killed run is told from a live one -----------------------------------------------
WORKER = textwrap.dedent(
    """
    import sys, time, torch
    sys.path.insert(0, {tests!r})
    import engine_factories as f

    class Slow:
        def on_step_ended(self, event):
            time.sleep({sleep})

    params = f.train_params({root!r}, n_epochs={epochs}, checkpoint_every_s=0,
                            overwrite_existing={overwrite})
    print("start", flush=True)
    run = f.model().train(params, callbacks=[Slow()])
    print("done", run.status.value, flush=True)
    """
)


def _worker(root, *, epochs=50, sleep=0.01, overwrite=False, env=None):
    code = WORKER.format(
        tests=str(Path(__file__).parent),
        root=str(root),
        epochs=epochs,
        sleep=sleep,
        overwrite=overwrite,
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _the_run(root):
    runs = (
        [p for p in Path(root).iterdir() if not p.name.startswith(".")]
        if Path(root).exists()
        else []
    )
    return runs[0] if len(runs) == 1 else None


def test_metadata_names_the_writer_and_a_heartbeat_advances(runs_root):
    proc = _worker(runs_root, env={"NNX_HEARTBEAT_S": "0.2"})
    try:
        assert _wait_for(lambda: _the_run(runs_root) is not None)
        meta_path = _the_run(runs_root) / "metadata.yaml"
        first = yaml.safe_load(meta_path.read_text())
        assert first["writer"]["pid"] == proc.pid
        assert first["writer"]["host"]
        assert _wait_for(
            lambda: yaml.safe_load(meta_path.read_text())["heartbeat"] > first["heartbeat"], 10
        )
        run = NNRun.load(_the_run(runs_root).name, runs_root=runs_root)
        assert run.status.value == "running"
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_run_reads_as_interrupted_and_does_not_block_a_rerun(runs_root):
    proc = _worker(runs_root, epochs=50)
    assert _wait_for(lambda: _the_run(runs_root) is not None)
    run_dir = _the_run(runs_root)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert yaml.safe_load((run_dir / "metadata.yaml").read_text())["status"] == "running"
    assert NNRun.load(run_dir.name, runs_root=runs_root).status.value == "interrupted"
    assert list_runs(runs_root)["status"].tolist() == ["interrupted"]
    # The same configuration trains again; the killed run's folder is kept aside.
    params = f.train_params(runs_root, n_epochs=50, checkpoint_every_s=0)
    with pytest.warns(RuntimeWarning, match=r"had interrupted; its folder was moved to"):
        again = f.model().train(params.replace(n_epochs=50), callbacks=[_Stopper(2)])
    assert again.id == run_dir.name
    assert len(list((runs_root / ".replaced").iterdir())) == 1


class _Stopper:
    """Stops a run after a few steps (keeps the rerun short)."""

    def __init__(self, steps):
        self.steps = steps

    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, event):
        if event.step >= self.steps:
            self.control.request_stop("test")


def test_a_reader_never_cleans_and_the_next_writer_does(trained):
    root, _, run = trained
    folder = run.run_dir / "checkpoints"
    junk = [folder / ".last.json.abc.tmp", folder / "last-00000099-deadbeef.safetensors"]
    for p in junk:
        p.write_bytes(b"left by a killed writer")
    NNCheckpoint.load(run.id, runs_root=root)
    NNRun.load(run.id, runs_root=root)
    assert all(p.exists() for p in junk)
    from nnx_lab.engine.checkpoint import write_checkpoint

    ckpt = NNCheckpoint.load(run.id, runs_root=root)
    meta = {k: ckpt.sidecar[k] for k in ("run_id", "epoch", "step", "net_params", "model_params")}
    write_checkpoint(
        run.run_dir, ["last"], model_state=ckpt.model_state, training_state=None, meta=meta
    )
    assert not any(p.exists() for p in junk)


# -- two writers, one run -------------------------------------------------------------
def test_overwrite_is_refused_while_another_process_writes_the_run(runs_root):
    proc = _worker(runs_root, epochs=8, sleep=0.02)
    try:
        assert _wait_for(lambda: _the_run(runs_root) is not None)
        params = f.train_params(
            runs_root, n_epochs=8, checkpoint_every_s=0, overwrite_existing=True
        )
        with pytest.raises(FileExistsError, match=rf"being written by process {proc.pid}"):
            f.model().train(params)
        out, err = proc.communicate(timeout=120)
        assert "done finished" in out, err
    finally:
        proc.kill()
    run = NNRun.load(_the_run(runs_root).name, runs_root=runs_root)
    assert run.status.value == "finished"
    assert len(run.epochs) == 8


def test_two_processes_racing_with_overwrite_never_corrupt_each_other(runs_root):
    """Both start at once with overwrite_existing=True: one writes the run, the other is
    refused (it found a live writer, or lost the rename); never a raw error, a deleted
    log, or metadata overwritten by the loser."""
    a = _worker(runs_root, epochs=6, sleep=0.01, overwrite=True)
    b = _worker(runs_root, epochs=6, sleep=0.01, overwrite=True)
    outs = [p.communicate(timeout=180) for p in (a, b)]
    done = [o for o, _ in outs if "done finished" in o]
    refused = [e for _, e in outs if "FileExistsError" in e]
    assert len(done) + len(refused) == 2, outs
    assert done, outs
    for err in refused:
        assert re.search(r"being written by process|created by another process", err), err
    run = NNRun.load(_the_run(runs_root).name, runs_root=runs_root)
    assert run.status.value == "finished"
    assert len(run.epochs) == 6


def test_deleting_the_run_directory_under_a_live_writer_fails_the_run_clearly(runs_root):
    class Vandal:
        def on_epoch_ended(self, event):
            if event.epoch == 1:
                shutil.rmtree(Path(event_run_dir[0]))

        def on_run_started(self, event):
            event_run_dir.append(event.run_dir)

    event_run_dir: list = []
    model = f.model()
    with pytest.raises(RunDirectoryError, match="deleted"):
        model.train(
            f.train_params(runs_root, n_epochs=3, checkpoint_every_s=0), callbacks=[Vandal()]
        )
    assert model.last_run.status.value == "failed"
    assert not Path(event_run_dir[0]).exists()  # nothing wrote into the deleted folder


def test_the_watchdog_fails_a_run_whose_folder_vanishes_mid_epoch(runs_root, monkeypatch):
    monkeypatch.setenv("NNX_HEARTBEAT_S", "0.05")

    class SlowThenVanish:
        def on_run_started(self, event):
            self.dir = Path(event.run_dir)

        def on_step_ended(self, event):
            if event.step == 3:
                # moved out of the way in one step, then deleted: the watchdog may be
                # writing the heartbeat at this very moment
                gone = self.dir.with_name("gone")
                self.dir.rename(gone)
                shutil.rmtree(gone)
            time.sleep(0.02)

    with pytest.raises(RunDirectoryError, match="deleted while the run was training"):
        f.model().train(f.train_params(runs_root, n_epochs=50), callbacks=[SlowThenVanish()])


# -- kills at random moments -------------------------------------------------------------
ZYGOTE = textwrap.dedent(
    """
    import json, os, random, signal, sys, time
    sys.path.insert(0, {tests!r})
    import torch
    import engine_factories as f
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])  # warm the imports once
    rng = random.Random(1234)
    results = []
    for i in range({kills}):
        root = os.path.join({root!r}, f"r{{i}}")
        delay = rng.uniform(0.0, 1.0)
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(1)

            class Pace:  # about a second of training, so the kills land all along it
                def on_step_ended(self, event):
                    time.sleep(0.003)

            try:
                params = f.train_params(root, n_epochs=40, checkpoint_every_s=0)
                f.model().train(params, callbacks=[Pace()])
            finally:
                os._exit(0)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        results.append([root, os.WIFSIGNALED(status)])
    print(json.dumps(results))
    """
)


def test_twenty_kills_at_random_moments_leave_runs_that_read_right_and_continue(tmp_path):
    code = ZYGOTE.format(tests=str(Path(__file__).parent), root=str(tmp_path), kills=20)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    results = json.loads(out.stdout.strip().splitlines()[-1])
    killed = 0
    for root, signalled in results:
        root = Path(root)
        run_dir = _the_run(root)
        if run_dir is None:
            continue  # killed before its folder was renamed into place: nothing to read
        run = NNRun.load(run_dir.name, runs_root=root)
        if signalled and run.status.value != "finished":
            killed += 1
            assert run.status.value == "interrupted", (root, run.status)
        last = run_dir / "checkpoints" / "last.json"
        params = f.train_params(root, n_epochs=1, checkpoint_every_s=0)
        if last.exists() and run.status.value == "interrupted":
            child = f.model().train(params.replace(resume_from_run_id=run.id))
            assert child.status.value == "finished"
        elif run.status.value == "interrupted":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rerun = f.model().train(f.train_params(root, n_epochs=6, checkpoint_every_s=0))
            assert rerun.status.value == "finished"
    assert killed >= 10  # most kills land while the run trains


def test_a_folder_replaced_under_a_live_writer_is_never_written_into(runs_root):
    """Another writer's folder now sits at the run's path: the first writer must not put
    a checkpoint or its final metadata there."""

    class Usurper:
        def on_run_started(self, event):
            self.dir = Path(event.run_dir)

        def on_epoch_ended(self, event):
            if event.epoch == 1:
                self.dir.rename(self.dir.with_name("moved-away"))
                self.dir.mkdir()
                (self.dir / "metadata.yaml").write_text("status: running\nowner: someone else\n")

    usurper = Usurper()
    with pytest.raises(RunDirectoryError, match="replaced by another"):
        f.model().train(
            f.train_params(runs_root, n_epochs=3, checkpoint_every_s=0), callbacks=[usurper]
        )
    assert sorted(p.name for p in usurper.dir.iterdir()) == ["metadata.yaml"]
    assert "someone else" in (usurper.dir / "metadata.yaml").read_text()


# -- a stop requested from outside the process ---------------------------------------------
def test_a_stop_request_file_stops_a_run_in_another_process(runs_root):
    from nnx_lab import request_stop

    proc = _worker(runs_root, epochs=200, sleep=0.01)
    try:
        assert _wait_for(lambda: _the_run(runs_root) is not None)
        run_id = _the_run(runs_root).name
        assert _wait_for(lambda: (runs_root / run_id / "metrics.jsonl").exists())
        request_stop(run_id, runs_root, reason="stopped from the runs panel", by="tester")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "done stopped" in out, err
    run = NNRun.load(run_id, runs_root=runs_root)
    assert run.status.value == "stopped"
    assert run.metadata["stop_reason"] == "stopped from the runs panel by tester"
    assert (runs_root / run_id / "checkpoints" / "last.json").is_file()  # LAST written
    with pytest.raises(ValueError, match="is stopped, not running"):
        request_stop(run_id, runs_root)
    with pytest.raises(ValueError, match="not a run id"):
        request_stop("../x", runs_root)
