"""Killed, racing and vanishing writers, kills at random moments, and a stop requested
from another process: each leaves runs that read right.

Part of the hardening review: each test tries to break one promise.
"""

from __future__ import annotations

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
import yaml

from nnx_lab import (
    NNCheckpoint,
    NNRun,
    list_runs,
)
from nnx_lab.errors import RunDirectoryError

ROOT = Path(__file__).resolve().parents[3]


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
        tests=str(Path(__file__).resolve().parents[1]),
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
    code = ZYGOTE.format(
        tests=str(Path(__file__).resolve().parents[1]), root=str(tmp_path), kills=20
    )
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
