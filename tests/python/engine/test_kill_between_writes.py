"""A kill at any boundary between a run's writes leaves BEST, LAST and the records
agreeing, and a resume from what is left agrees with itself and with the uninterrupted
run.

The child processes kill themselves with ``NNX_FAULT_KILL_AT=<point>@<n>`` (the
writers' own fault-injection hook, ``nnx_lab.engine.write_faults.kill_point``) at the
n-th time a point between two writes is reached. The boundaries, in write order: the
epoch's log line is written, ``checkpoint.begin``, ``checkpoint.last.tensors``,
``checkpoint.last.sidecar`` (LAST committed), ``checkpoint.best.tensors``,
``checkpoint.best.sidecar`` (BEST committed), ``metadata.best`` (before metadata.yaml
names the new BEST). The bug this guards: a kill between LAST and BEST at an improving
epoch used to give a resumed run that counted the killed epoch as best while its BEST
checkpoint held the epoch before.

One "zygote" process imports torch once and forks a child per point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from fault_factories import build, child_env, killed_runs, trained_whole, zygote

from nnx_lab import Checkpoints, NNCheckpoint, NNRun, ResumeError

EPOCHS = 5  # epochs 1-3 and 5 improve the default signal, epoch 4 does not

ZYGOTE = zygote(
    """
import os
from nnx_lab.engine.write_faults import FAULT_ENV

def arm(point):
    os.environ[FAULT_ENV] = point
""",
    EPOCHS,
)

# point -> (the epoch LAST holds, the epoch BEST holds) after the kill. checkpoint_every_s=0
# writes once per epoch, so "@2" is epoch 2 (improving) and "@4" epoch 4 (not improving).
POINTS = {
    "checkpoint.begin@2": (1, 1),
    "checkpoint.last.tensors@2": (1, 1),
    "checkpoint.last.sidecar@2": (2, 1),  # LAST committed, BEST not yet: LAST is BEST
    "checkpoint.best.tensors@2": (2, 1),
    "checkpoint.best.sidecar@2": (2, 2),
    "metadata.best@2": (2, 2),  # metadata.yaml still names epoch 1
    "checkpoint.last.sidecar@4": (4, 3),
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    base = tmp_path_factory.mktemp("killed-between")
    return killed_runs(ZYGOTE, {point: str(base / point.replace("@", "-")) for point in POINTS})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return trained_whole(tmp_path_factory.mktemp("whole"), EPOCHS)


def _sidecar(run_dir: Path, type_: str) -> dict | None:
    path = run_dir / "checkpoints" / f"{type_}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line]


def assert_on_disk_agreement(run_dir: Path) -> None:
    """What a run folder holds at any instant: a LAST that names itself or the BEST on
    disk as its best, a BEST never newer than LAST, a metadata.yaml that never names a
    BEST not yet on disk, and a log that marks the best LAST names as improved."""
    last, best = _sidecar(run_dir, "last"), _sidecar(run_dir, "best")
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    if last is not None:
        named = (last["best_epoch"], last["best_step"])
        own = (last["epoch"], last["step"])
        at = None if best is None else (best["epoch"], best["step"])
        assert named in (own, at), (named, own, at)
        assert best is None or best["step"] <= last["step"]
        improved = [
            (e["epoch"], e["step"])
            for e in _events(run_dir)
            if e["event"] == "epoch_ended" and e["improved"] and e["step"] <= last["step"]
        ]
        assert improved[-1] == named
    if meta.get("best") is not None:
        assert best is not None
        assert meta["best"]["epoch"] <= best["epoch"]


def assert_resumed_agreement(run: NNRun) -> None:
    """A finished run: BEST, LAST, metadata, the log and the selection all name one epoch."""
    last, best = _sidecar(run.run_dir, "last"), _sidecar(run.run_dir, "best")
    assert (last["best_epoch"], last["best_step"]) == (best["epoch"], best["step"])
    assert (best["best_epoch"], best["best_step"]) == (best["epoch"], best["step"])
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["best"]["epoch"] == best["epoch"]
    assert last["training_state"]["best_value"] == best["training_state"]["best_value"]
    assert meta["best"]["value"] == best["training_state"]["best_value"]
    improved = [e for e in _events(run.run_dir) if e["event"] == "epoch_ended" and e["improved"]]
    assert (improved[-1]["epoch"], improved[-1]["step"]) == (best["epoch"], best["step"])
    assert improved[-1]["signal"] == best["training_state"]["best_value"]


class BestAtStart:
    """What the resumed run's BEST and record say before it trains a step."""

    def __init__(self):
        self.seen = None

    def on_run_started(self, event):
        run_dir = Path(event.run_dir)
        self.seen = (_sidecar(run_dir, "best"), dict(self._meta(run_dir)))

    @staticmethod
    def _meta(run_dir):
        return yaml.safe_load((run_dir / "metadata.yaml").read_text())


@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_between_writes_leaves_records_that_agree_and_a_resume_that_agrees(
    killed, uninterrupted, point
):
    root, status, run_id = killed[point]
    assert status == 9, f"the child was not killed at {point} (status {status})"
    run_dir = root / run_id
    last = NNCheckpoint.load(run_id, Checkpoints.LAST, root)
    best = NNCheckpoint.load(run_id, Checkpoints.BEST, root)
    assert (last.epoch, best.epoch) == POINTS[point]
    assert_on_disk_agreement(run_dir)

    # The resume carries the BEST LAST names (LAST itself, when BEST was not yet written)
    state = last.training_state()
    model, params = build(root, EPOCHS, resume_from_run_id=run_id, resume_epochs="planned")
    at_start = BestAtStart()
    resumed = model.train(params, callbacks=[at_start])
    carried, meta = at_start.seen
    named = (last.sidecar["best_epoch"], last.sidecar["best_step"])
    assert (carried["epoch"], carried["step"]) == named
    assert carried["training_state"]["best_value"] == state.best_value
    assert meta["best"]["epoch"] == named[0]
    assert meta["best"]["value"] == state.best_value

    # ... and the resumed run ends as the uninterrupted one, everything agreeing
    assert resumed.status.value == "finished"
    assert_resumed_agreement(resumed)
    _, whole = uninterrupted
    assert [p.train_edp.loss for p in resumed.idps] == [p.train_edp.loss for p in whole.idps]
    whole_best = NNCheckpoint.load(whole, Checkpoints.BEST)
    child_best = NNCheckpoint.load(resumed, Checkpoints.BEST)
    assert child_best.epoch == whole_best.epoch
    for name, weight in whole_best.model_state.items():
        assert torch.equal(weight, child_best.model_state[name]), name


# -- a waiting BEST, committed over a LAST that names the BEST on disk --------------------
POLICY = """
import json, os, sys, traceback
from pathlib import Path
import torch
from nnx_lab.engine.handlers.checkpoints import CheckpointPolicy
from nnx_lab.engine.write_faults import FAULT_ENV

class State:
    def __init__(self, loop, complete):
        self.tree = {"epoch": loop.epoch, "step": loop.step, "complete": complete}
    def to_tree(self):
        return self.tree

class Step:
    net = torch.nn.Linear(2, 1)

class Loop:
    train_step = Step()
    epoch = step = 0
    last_selection = None
    final_epoch = False
    def capture_state(self, complete):
        return State(self, complete)

# (selection, due) per epoch: BEST waits at 1, LAST at 2 names it, BEST waits at 3 and
# is committed by the LAST of epoch 4, which must not leave LAST naming a BEST gone.
SCRIPT = [("improved", False), (None, True), ("improved", False), (None, True)]
results = {}
for point, folder in json.loads(sys.argv[1]).items():
    pid = os.fork()
    if pid == 0:
        try:
            os.environ[FAULT_ENV] = point
            (Path(folder) / "checkpoints").mkdir(parents=True)
            loop = Loop()
            policy = CheckpointPolicy(Path(folder), loop, {"run_id": "x"}, 1e9, lambda e: None)
            for epoch, (selection, due) in enumerate(SCRIPT, 1):
                loop.epoch, loop.step = epoch, 10 * epoch
                loop.last_selection, loop.final_epoch = selection, due
                Step.net.weight.data.fill_(epoch)
                policy.on_epoch_ended(None)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    results[point] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
print(json.dumps(results))
"""

# point -> (LAST epoch, LAST names, BEST epoch) left on disk. Writes: epoch 2 commits
# BEST 1 alone (no LAST yet) then LAST 2; epoch 4 commits LAST+BEST 3, then LAST 4.
WAITING = {
    "checkpoint.begin@3": (2, 1, 1),
    "checkpoint.last.sidecar@2": (3, 3, 1),  # the waiting BEST went in as LAST first
    "checkpoint.best.sidecar@2": (3, 3, 3),
    "checkpoint.last.tensors@3": (3, 3, 3),
    "checkpoint.last.sidecar@3": (4, 3, 3),
}


def test_a_waiting_best_never_leaves_last_naming_a_best_that_is_gone(tmp_path):
    folders = {point: str(tmp_path / point.replace("@", "-")) for point in WAITING}
    done = subprocess.run(
        [sys.executable, "-c", POLICY, json.dumps(folders)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    for point, (last_epoch, names, best_epoch) in WAITING.items():
        assert statuses[point] == 9, (point, statuses[point], done.stderr)
        folder = Path(folders[point])
        last, best = _sidecar(folder, "last"), _sidecar(folder, "best")
        assert (last["epoch"], last["best_epoch"], best["epoch"]) == (
            last_epoch,
            names,
            best_epoch,
        ), point
        assert last["best_epoch"] in (last["epoch"], best["epoch"])
        assert best["step"] <= last["step"]


# -- a source whose checkpoints disagree is refused, with the fix --------------------------
def test_a_resume_refuses_a_last_whose_best_is_not_on_disk(tmp_path):
    """A BEST restored from an older copy: LAST (epoch 4) names epoch 3, BEST holds 1."""
    root = tmp_path / "runs"
    model, params = build(root, 4)
    run = model.train(params)
    folder = run.run_dir / "checkpoints"
    # put epoch 1's BEST, from a run of the same recipe (so the same id), in its place
    model, params = build(tmp_path / "first", 4)

    class StopAfterFirst:
        def on_attach(self, control):
            self.control = control

        def on_epoch_ended(self, event):
            self.control.request_stop("first epoch only")

    first = model.train(params, callbacks=[StopAfterFirst()])
    assert first.id == run.id
    src = first.run_dir / "checkpoints"
    name = json.loads((src / "best.json").read_text())["tensors_file"]
    for old in folder.glob("best*"):
        old.unlink()
    (folder / name).write_bytes((src / name).read_bytes())
    (folder / "best.json").write_bytes((src / "best.json").read_bytes())
    assert NNCheckpoint.load(run.id, Checkpoints.BEST, root).epoch == 1

    before = sorted(p.name for p in root.iterdir())
    model, params = build(root, 1, resume_from_run_id=run.id)
    with pytest.raises(
        ResumeError,
        match=r"counts epoch 3 \(step 12\) as BEST, but BEST holds "
        r"epoch 1.*resume_from_checkpoint='best'",
    ):
        model.train(params)
    assert sorted(p.name for p in root.iterdir()) == before  # refused before any write
    # the fix the message names works
    model, params = build(root, 1, resume_from_run_id=run.id, resume_from_checkpoint="best")
    assert model.train(params).status.value == "finished"
