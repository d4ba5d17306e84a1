"""A disk that refuses writes mid-run (full, over quota, read-only, I/O errors) ends the
run "failed" with the reason, in memory, in the event stream and on disk as far as the
disk allows; the writer lock is released; and once space is freed the same run trains
again.

Every writer meets the fault first in one of the tests: a checkpoint, the log, the
watchdog's heartbeat, and the run's final record. The fault is simulated (the one atomic
writer and ``os.write`` refuse writes under the runs root once the "disk" is full), so
the tests run everywhere; one test fills a real 2 MiB tmpfs when it may mount one.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import engine_factories as f
import pytest
import yaml

from nnx_lab import NNRun, RunStatus
from nnx_lab.engine import checkpoint as checkpoint_module
from nnx_lab.engine.handlers import run_directory
from nnx_lab.errors import RunDirectoryError
from nnx_lab.runs import _atomic


class FullDisk:
    """Once ``full``, writes under ``root`` fail with ``code`` (only those whose file
    name passes ``only``, when given). ``in_place=False``: the disk takes nothing at all,
    not even a record rewritten over its own blocks (read-only, I/O errors)."""

    def __init__(self, monkeypatch, root, code=errno.ENOSPC, *, only=None, in_place=True):
        self.root, self.code, self.only = Path(root).resolve(), code, only
        self.full = False
        real_atomic, real_write = _atomic.atomic_write_bytes, os.write

        def atomic(path, data):
            self._check(Path(path))
            return real_atomic(path, data)

        def write(fd, data):
            try:
                target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                target = None  # not a file of this process's view: never ours
            if target is not None:
                self._check(target)
            return real_write(fd, data)

        def in_place_refused(path, data):
            raise OSError(code, os.strerror(code), str(path))

        monkeypatch.setattr(_atomic, "atomic_write_bytes", atomic)
        monkeypatch.setattr(checkpoint_module, "atomic_write_bytes", atomic)
        monkeypatch.setattr(os, "write", write)
        if not in_place:
            monkeypatch.setattr(run_directory, "_rewrite_in_place", in_place_refused)

    def _check(self, path: Path) -> None:
        if not self.full or self.root not in path.resolve().parents:
            return
        if self.only is None or self.only(path.name):
            raise OSError(self.code, os.strerror(self.code), str(path))


class Events:
    def __init__(self):
        self.finished = None

    def on_run_finished(self, event):
        self.finished = event


class FillAt:
    """Fills the disk at a chosen moment of the run."""

    def __init__(self, disk, *, step=None, epoch=None, ending=False, sleep=0.0):
        self.disk, self.step, self.epoch, self.ending, self.sleep = disk, step, epoch, ending, sleep

    def on_step_ended(self, event):
        if self.step is not None and event.step >= self.step:
            self.disk.full = True
        time.sleep(self.sleep)

    def on_epoch_ended(self, event):
        if self.epoch is not None and event.epoch >= self.epoch:
            self.disk.full = True

    def on_run_ending(self, event):
        if self.ending:
            self.disk.full = True


def _lock_is_free(run_dir: Path) -> bool:
    fd = os.open(run_dir / ".writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _assert_log_whole(run_dir: Path) -> None:
    text = (run_dir / "metrics.jsonl").read_text()
    assert text == "" or text.endswith("\n")
    for line in text.splitlines():
        json.loads(line)  # no torn line, anywhere


def _fails_with_the_reason(model, params, disk, callbacks, reason):
    events = Events()
    with pytest.raises(RunDirectoryError, match=rf"cannot write .*{reason}.*ends as failed"):
        model.train(params, callbacks=[*callbacks, events])
    run = model.last_run
    assert run.status is RunStatus.FAILED
    assert reason in run.error
    assert events.finished.status == "failed"
    assert reason in events.finished.error
    assert _lock_is_free(run.run_dir)
    return run


def _rerun_after_freeing_space(run, params, disk, had):
    disk.full = False
    with pytest.warns(RuntimeWarning, match=rf"had {had}; its folder was moved to"):
        again = f.model().train(params)
    assert again.id == run.id
    assert again.status is RunStatus.FINISHED
    assert NNRun.load(run.id, runs_root=params.runs_root).status is RunStatus.FINISHED


@pytest.mark.parametrize(
    ("first", "fill"),
    [
        ("checkpoint", {"epoch": 2}),  # the policy writes right after the epoch's end
        ("log", {"step": 3}),  # the next log flush (log_every=1) meets it
    ],
)
def test_a_disk_that_fills_mid_run_ends_it_failed_and_a_rerun_trains(
    runs_root, monkeypatch, first, fill
):
    disk = FullDisk(monkeypatch, runs_root)
    params = f.train_params(runs_root, n_epochs=4, checkpoint_every_s=0, log_every=1)
    run = _fails_with_the_reason(f.model(), params, disk, [FillAt(disk, **fill)], "ENOSPC")
    what = "checkpoint" if first == "checkpoint" else "the log"
    assert what in run.error
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "failed"  # rewritten over its own blocks: no room for a copy
    assert "ENOSPC" in meta["error"]
    assert NNRun.load(run.id, runs_root=runs_root).status is RunStatus.FAILED
    _assert_log_whole(run.run_dir)
    _rerun_after_freeing_space(run, params, disk, "failed")


@pytest.mark.parametrize("code", [errno.EROFS, errno.EIO, errno.EDQUOT])
def test_a_disk_that_takes_nothing_more_still_releases_the_run(runs_root, monkeypatch, code):
    """Read-only or failing: not even the failure can be recorded; the run still ends
    "failed" in memory and in the event stream, and a rerun is not refused."""
    disk = FullDisk(monkeypatch, runs_root, code, in_place=False)
    params = f.train_params(runs_root, n_epochs=3, checkpoint_every_s=0)
    name = errno.errorcode[code]
    with pytest.warns(RuntimeWarning, match="could not be written"):
        run = _fails_with_the_reason(f.model(), params, disk, [FillAt(disk, epoch=1)], name)
    assert yaml.safe_load((run.run_dir / "metadata.yaml").read_text())["status"] == "running"
    _rerun_after_freeing_space(run, params, disk, "interrupted")


def test_a_heartbeat_the_disk_refuses_ends_the_run(runs_root, monkeypatch):
    """Only metadata.yaml is refused (as a quota on one file would): the watchdog is the
    first writer to meet it, between two log flushes."""
    monkeypatch.setenv("NNX_HEARTBEAT_S", "0.05")
    disk = FullDisk(monkeypatch, runs_root, errno.EDQUOT, only=lambda n: n == "metadata.yaml")
    params = f.train_params(runs_root, n_epochs=50, log_every=10_000)
    fill = FillAt(disk, step=2, sleep=0.02)
    run = _fails_with_the_reason(f.model(), params, disk, [fill], "EDQUOT")
    assert "metadata.yaml" in run.error
    assert len(run.epochs) < 50
    assert yaml.safe_load((run.run_dir / "metadata.yaml").read_text())["status"] == "failed"
    _rerun_after_freeing_space(run, params, disk, "failed")


def test_a_run_whose_end_cannot_be_written_does_not_end_finished(runs_root, monkeypatch):
    """Every epoch trained and every checkpoint written, then the disk fills: the end
    cannot be recorded as "finished", so the run ends "failed", and says why."""
    disk = FullDisk(monkeypatch, runs_root)
    params = f.train_params(runs_root, n_epochs=2, checkpoint_every_s=0)
    run = _fails_with_the_reason(f.model(), params, disk, [FillAt(disk, ending=True)], "ENOSPC")
    assert "metadata.yaml" in run.error
    assert len(run.epochs) == 2
    assert yaml.safe_load((run.run_dir / "metadata.yaml").read_text())["status"] == "failed"
    _rerun_after_freeing_space(run, params, disk, "failed")


def test_a_disk_full_before_the_run_exists_leaves_nothing(runs_root, monkeypatch):
    runs_root.mkdir(parents=True)
    disk = FullDisk(monkeypatch, runs_root)
    disk.full = True
    with pytest.raises(RunDirectoryError, match=r"cannot write the run directory .*ENOSPC.*no run"):
        f.model().train(f.train_params(runs_root, n_epochs=1))
    assert list(runs_root.iterdir()) == []


# -- a real full disk ------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, mounted for the test (skipped where mounting is not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip()}); the simulated tests cover it"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


class StopSoon:
    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, event):
        if event.step >= 3:
            self.control.request_stop("enough")


def test_a_real_full_disk_ends_the_run_failed_and_a_rerun_trains_after_freeing_it(small_disk):
    root = small_disk / "runs"
    ballast = small_disk / "ballast"
    stat = os.statvfs(small_disk)
    with open(ballast, "wb") as fh:
        fh.write(b"\0" * (stat.f_bavail * stat.f_frsize - 160 * 1024))
    params = f.train_params(root, n_epochs=1000, checkpoint_every_s=0, log_every=1)
    model = f.model()
    events = Events()
    with pytest.raises(RunDirectoryError, match=r"No space left on device \(ENOSPC\)"):
        model.train(params, callbacks=[events])
    run = model.last_run
    assert run.status is RunStatus.FAILED
    assert events.finished.status == "failed"
    assert 1 <= len(run.epochs) < 1000  # it failed mid-run
    assert _lock_is_free(run.run_dir)
    assert NNRun.load(run.id, runs_root=root).status is RunStatus.FAILED
    _assert_log_whole(run.run_dir)

    ballast.unlink()  # space freed: the same run trains again
    with pytest.warns(RuntimeWarning, match=r"had failed; its folder was moved to"):
        again = f.model().train(params, callbacks=[StopSoon()])
    assert again.id == run.id
    assert again.status is RunStatus.STOPPED
    shutil.rmtree(root, ignore_errors=True)
