"""What the JupyterLab runs panel's server side costs (run by hand, not a test).

Synthetic runs (metadata.yaml and a metrics.jsonl as the engine writes them; no
training, no torch) under a temporary root. Each figure is compared with a baseline
measured in the same process:

* listing N runs (``RunsService.list_runs``: the bounded search for runs folders, a
  stat per run, metadata.yaml read only when it changed) against
  ``nnx_lab.runs.run_rows`` (which reads every metadata.yaml each time), cold and warm;
* reading a log in pages (``RunsService.log_page``: bounded reads, every line checked
  against the event schema, JSON made browser-safe) against ``JsonlReader`` reading
  the same file whole (parse only).

    python benchmarks/lab_server.py [--runs 500] [--steps 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from nnx_lab.runs import JsonlReader, run_rows
from nnx_lab.server import NNxLab, RunsService


def best(fn, rounds):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def make_runs(root: Path, n: int) -> None:
    runs = root / "runs"
    for i in range(n):
        d = runs / f"{i:032x}"
        d.mkdir(parents=True)
        meta = {
            "status": "finished",
            "started_at": 1000.0 + i,
            "finished_at": 1100.0 + i,
            "planned_epochs": 10,
            "epochs_completed": 10,
            "steps": 800,
            "best": {"value": 0.1, "source": "val_edp.error", "epoch": 7},
            "writer": {"pid": 1, "host": "elsewhere", "boot_id": None, "proc_start": None},
            "environment": {"torch": "2.13.0", "numpy": "2.4.6", "python": "3.11.7"},
            "precision": {"requested": "fp32", "effective": "fp32", "covers": ["train"]},
        }
        (d / "metadata.yaml").write_text(yaml.safe_dump(meta))


def make_log(path: Path, steps: int) -> None:
    with path.open("w") as fh:
        fh.write(
            json.dumps(
                {
                    "event": "run_started",
                    "run_id": "0" * 32,
                    "run_dir": None,
                    "n_epochs": 1,
                    "start_epoch": 1,
                    "start_step": 0,
                    "steps_per_epoch": steps,
                    "time": 1.0,
                }
            )
            + "\n"
        )
        for s in range(1, steps + 1):
            fh.write(
                json.dumps(
                    {
                        "event": "step",
                        "step": s,
                        "epoch": 1,
                        "batch": s - 1,
                        "lr": 0.01,
                        "samples": 32,
                        "loss": 1.0 / s,
                        "error": 0.5,
                        "accuracy": 0.5,
                        "precision": 0.5,
                        "recall": 0.5,
                        "f1": 0.5,
                    }
                )
                + "\n"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_runs(root, args.runs)
        config = NNxLab(rescan_s=3600.0, max_runs=args.runs)
        base_min, base_med = best(lambda: run_rows(root / "runs"), args.rounds)
        cold_min, cold_med = best(lambda: RunsService(config, root).list_runs(), args.rounds)
        warm = RunsService(config, root)
        warm.list_runs()
        warm_min, warm_med = best(warm.list_runs, args.rounds)
        print(f"listing {args.runs} runs (best / median of {args.rounds}):")
        print(f"  run_rows (baseline)          {base_min * 1e3:8.1f} / {base_med * 1e3:8.1f} ms")
        print(
            f"  list_runs, first request    {cold_min * 1e3:8.1f} / {cold_med * 1e3:8.1f} ms"
            f"   ratio {cold_min / base_min:.2f}"
        )
        print(
            f"  list_runs, while shown       {warm_min * 1e3:8.1f} / {warm_med * 1e3:8.1f} ms"
            f"   ratio {warm_min / base_min:.2f}"
        )

        run = root / "runs" / f"{0:032x}"
        log = run / "metrics.jsonl"
        make_log(log, args.steps)
        size = log.stat().st_size
        key = warm.discovery(refresh=True).folders[0].key

        def paged():
            offset, more, n = 0, True, 0
            while more:
                page = warm.log_page(key, run.name, offset)
                json.dumps(page, allow_nan=False)  # what goes on the wire
                offset, more = page["next_offset"], page["more"]
                n += 1
            return n

        pages = paged()
        base_min, _ = best(lambda: JsonlReader(log).read(), args.rounds)
        page_min, _ = best(paged, args.rounds)
        mb = size / 2**20
        print(
            f"reading a {mb:.1f} MiB log ({args.steps} steps) in {pages} pages of "
            f"{config.page_bytes >> 20} MiB:"
        )
        print(
            f"  JsonlReader, whole (baseline) {base_min * 1e3:8.1f} ms ({mb / base_min:6.1f} MiB/s)"
        )
        print(
            f"  log_page, paged + checked    {page_min * 1e3:8.1f} ms ({mb / page_min:6.1f} MiB/s)"
            f"   ratio {page_min / base_min:.2f}"
        )
        print(f"  one page: {page_min / pages * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
