"""What a hostile run file costs its readers (run by hand, not a test).

Two files a shared runs folder can hold, and what reading them costs, each measured in
a fresh process (wall time, and the peak resident memory the reading adds over the
process once its imports are done):

* ``yaml``: a 370-byte ``metadata.yaml`` of nested YAML aliases (8 levels of 9: 43
  million values once expanded, in the ``error`` and ``torch`` fields) in one run of a
  root, read by
  ``nnx_lab.runs.list_runs``, by the server's listing (``RunsService.list_runs``, what
  the panel polls every 2 s) and by the server's compare of that run with a good one;
* ``log``: a run whose ``metrics.jsonl`` holds ``--log-mb`` megabytes of step lines as
  the engine writes them, replayed by ``TrainingMonitor.from_run(..., follow=False)``.

    python benchmarks/hostile_files.py [--case yaml|log|all] [--log-mb 200]

Printed on 2026-12-01 by ``python benchmarks/hostile_files.py --case all`` on the 2-vCPU
machine under a load of 9-10 (other jobs running), before the strict records (commit
9ac4479, run as ``PYTHONPATH=<that tree>``) and after (branch h20-listing), back to
back. Times vary 2-3x with the load (an earlier pair at a load of 5 gave 39 s / 13 s
for the two listings and 40 s / 46 s for the log); peak memory does not.

======================  ==========================  ================================
case                    before                      after
======================  ==========================  ================================
yaml: list_runs         18.7 s, +274 MB             0.03 s, +1.8 MB (a damaged row)
yaml: server listing    22.4 s, +274 MB             0.01 s, +0.2 MB (a damaged row)
yaml: server compare    51.2 s, +1208 MB (409)      0.02 s, +0.2 MB (409, the reason)
log: from_run, 201 MiB  120.7 s, +2067 MB           86.7 s, +22 MB
======================  ==========================  ================================
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# 8 levels of 9 aliases: 9**8 (43 million) values once expanded, named by the fields
# the readers show (the error of a failed run, a library version).
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "status: failed\nerror: *h\ntorch: *h\n"
)
BAD = "b" * 32  # the run with the bomb
GOOD = "c" * 32
LOGGED = "d" * 32  # the run with the big log

GOOD_META = "status: finished\nstarted_at: 1796000000.0\nfinished_at: 1796000100.0\n"
RUN_YAML = (
    "format: 1\nnet: {input_dim: 8, output_dim: 3}\nmodel: {net: feed_fwd}\n"
    "train: {n_epochs: 1, seed: SEED}\ndata: null\ninitial_weights: null\n"
)


def _peak_kib() -> int:
    """The process's resident high-water mark (KiB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> None:
    # Linux: writing 5 resets the high-water mark to the current resident size.
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def make_yaml_root(root: Path) -> None:
    runs = root / "runs"
    for run_id, meta, seed in ((BAD, BOMB, 1), (GOOD, GOOD_META, 2)):
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "metadata.yaml").write_text(meta)
        (runs / run_id / "run.yaml").write_text(RUN_YAML.replace("SEED", str(seed)))


def make_log_root(root: Path, megabytes: int) -> Path:
    run = root / "runs" / LOGGED
    run.mkdir(parents=True)
    (run / "metadata.yaml").write_text(GOOD_META)
    started = {
        "event": "run_started",
        "run_id": LOGGED,
        "run_dir": str(run),
        "n_epochs": 1000,
        "start_epoch": 1,
        "start_step": 0,
        "steps_per_epoch": 1000,
        "config": {},
        "parent_run_id": None,
        "time": 1796000000.0,
    }
    target = megabytes << 20
    with (run / "metrics.jsonl").open("w") as fh:
        fh.write(json.dumps(started) + "\n")
        step, written = 0, 0
        while written < target:
            lines = []
            for _ in range(10_000):
                step += 1
                lines.append(
                    f'{{"event": "step", "step": {step}, "epoch": {step // 1000 + 1}, '
                    f'"batch": {step % 1000}, "lr": 0.001, "samples": 32, '
                    f'"loss": {1.0 / step!r}, "error": 0.25, "accuracy": 0.75}}\n'
                )
            chunk = "".join(lines)
            fh.write(chunk)
            written += len(chunk)
        fh.write(
            json.dumps(
                {
                    "event": "run_finished",
                    "run_id": LOGGED,
                    "status": "finished",
                    "epochs_completed": step // 1000,
                    "steps": step,
                    "time": 1796000100.0,
                }
            )
            + "\n"
        )
    return run


def child(case: str, root: Path) -> dict:
    """One measurement, in this (fresh) process."""
    import pandas  # noqa: F401 - list_runs imports it: the imports are not measured

    from nnx_lab.runs import list_runs
    from nnx_lab.server import NNxLab, RunsService

    outcome = ""
    if case == "log":
        from nnx_lab.widgets import TrainingMonitor

        fn = lambda: TrainingMonitor.from_run(LOGGED, root / "runs", follow=False)  # noqa: E731
    elif case == "yaml-list_runs":
        fn = lambda: list_runs(root / "runs")  # noqa: E731
    else:
        service = RunsService(NNxLab(rescan_s=1e9), root)
        key = service.discovery().folders[0].key
        if case == "yaml-server-listing":
            fn = service.list_runs
        else:
            fn = lambda: service.compare([(key, GOOD), (key, BAD)])  # noqa: E731
    _reset_peak()
    base = _peak_kib()
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:
        outcome = f"refused: {type(exc).__name__}: {str(exc)[:120]}"
    else:
        if case == "yaml-list_runs":
            row = result.set_index("run_id").loc[BAD]
            outcome = f"row {row['status']}: {str(row['error'])[:100]}"
        elif case == "yaml-server-listing":
            row = next(r for r in result["runs"] if r["run_id"] == BAD)
            outcome = f"row {row['status']}: {str(row['error'])[:100]}"
        elif case == "log":
            outcome = f"{result.steps_seen} steps, status {result.status}"
        else:
            outcome = f"{len(result['rows'])} rows"
    seconds = time.perf_counter() - start
    return {
        "case": case,
        "seconds": seconds,
        "peak_mb": (_peak_kib() - base) / 1024,
        "outcome": outcome,
    }


def measure(case: str, root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, "--root", str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "NNX_TQDM_DISABLE": "1"},
        timeout=3600,
    )
    if out.returncode != 0:
        last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
        nan = float("nan")
        return {
            "case": case,
            "seconds": nan,
            "peak_mb": nan,
            "outcome": f"exit {out.returncode}: {last}",
        }
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=("yaml", "log", "all"), default="all")
    ap.add_argument("--log-mb", type=int, default=200)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(args.root))))
        return
    with tempfile.TemporaryDirectory(prefix="nnx-hostile-") as tmp:
        results = []
        if args.case in ("yaml", "all"):
            root = Path(tmp) / "yaml"
            make_yaml_root(root)
            print(f"metadata.yaml of aliases: {len(BOMB.encode())} bytes", flush=True)
            for case in ("yaml-list_runs", "yaml-server-listing", "yaml-server-compare"):
                results.append(measure(case, root))
                print(_line(results[-1]), flush=True)
        if args.case in ("log", "all"):
            root = Path(tmp) / "log"
            run = make_log_root(root, args.log_mb)
            size = (run / "metrics.jsonl").stat().st_size
            print(f"metrics.jsonl: {size / (1 << 20):.0f} MiB", flush=True)
            results.append(measure("log", root))
            print(_line(results[-1]), flush=True)


def _line(r: dict) -> str:
    return f"{r['case']:<22} {r['seconds']:8.2f} s  +{r['peak_mb']:7.1f} MB peak  {r['outcome']}"


if __name__ == "__main__":
    main()
