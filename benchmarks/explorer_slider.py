"""Kernel or browser: which one should measure a temperature slider's move? (run by hand)

The CalibrationExplorer's slider changes T; the reliability diagram and NLL / Brier / ECE
must follow. Both designs ship (``compute=``) and are measured end to end in the same
run, in a real JupyterLab in headless Chromium (the browser tests' harness):

* **kernel**: the view sends T (one value in flight); the kernel measures the logits
  it holds (``TemperatureSweep``: one exponential over them, NumPy) and sends the
  per-bin summaries and the metrics through the shared transport; the view draws them.
* **browser**: the kernel sends the logits once, float32, shifted by each row's
  maximum (4 bytes per logit, plus the targets); the view measures them itself at each
  move (js/calibration/measure.js) and writes T to the kernel once the slider rests.

For each design and size: the time per slider move, from the input event to the frame
after the diagram shows the new T (median and 90th percentile of one-at-a-time moves,
the designs alternating round by round), the bytes per move on the kernel's websocket
(both directions, as Playwright sees them: the comm messages and the kernel's busy / idle
status; the browser design's write at rest included), and what the browser design sends
once (at display and at each page reload): its logits buffer. Then the
AbstentionExplorer's threshold slider (kernel readouts) on the same rows.

    python benchmarks/explorer_slider.py [--rows 100000] [--classes 10 100] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import shutil
import statistics
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from lab_harness import JupyterServer, find_chromium, open_lab  # noqa: E402

DESIGNS = ("kernel", "browser")
SLIDER = (0.05, 20.0)

SETUP = """
import torch
from nnx_lab import ProbabilitySpec, prediction_from_logits
from nnx_lab.calibration import fit_temperature
from nnx_lab.widgets import AbstentionExplorer, CalibrationExplorer

torch.manual_seed(0)
N, C = {rows}, {classes}
y = torch.randint(0, C, (N,))
z = torch.randn(N, C)
z[torch.arange(N), y] += 2.5
z = 3 * z  # over-confident
prediction = prediction_from_logits(z, ProbabilitySpec("categorical"))
kernel_design = CalibrationExplorer(prediction, y, model_id="benchmark", compute="kernel")
browser_design = CalibrationExplorer(prediction, y, model_id="benchmark", compute="browser")
calibrator = fit_temperature(prediction, y, model_id="benchmark", split_id="c").require()
abstention = AbstentionExplorer(calibrator.transform(prediction, model_id="benchmark"), y)
"""

# Moves the slider of explorer `index` to each position, one at a time, and returns the
# milliseconds from the input event to the frame after the diagram shows the new T.
MOVES = """async ([index, positions, lo, hi]) => {
  const root = document.querySelectorAll('.nnx-calibration')[index];
  const slider = root.querySelector('[data-testid="temperature"]');
  const fig = root.querySelector('[data-testid="reliability-chart"]');
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const times = [];
  for (const pos of positions) {
    const want = String(Number((lo * (hi / lo) ** (pos / 1000)).toPrecision(3)));
    if (fig.dataset.temperature === want) continue;
    const seen = new Promise((resolve) => {
      const obs = new MutationObserver(() => {
        if (fig.dataset.temperature === want) { obs.disconnect(); resolve(); }
      });
      obs.observe(fig, { attributes: true });
    });
    const t0 = performance.now();
    slider.value = String(pos);
    slider.dispatchEvent(new Event('input', { bubbles: true }));
    await seen;
    await frame();
    times.push(performance.now() - t0);
  }
  return times;
}"""

# The same for the abstention explorer's threshold slider: until the readouts (from the
# kernel) are for the stop's threshold.
THRESHOLD_MOVES = """async ([positions]) => {
  const root = document.querySelector('.nnx-abstention');
  const slider = root.querySelector('[data-testid="threshold"]');
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const times = [];
  for (const pos of positions) {
    if (String(pos) === slider.value) continue;
    const seen = new Promise((resolve) => {
      const obs = new MutationObserver(() => {
        if (root.dataset.threshold === slider.dataset.asked) { obs.disconnect(); resolve(); }
      });
      obs.observe(root, { attributes: true });
    });
    slider.dataset.asked = String(root.nnxView.sync.stores.stops.column('threshold')[pos]);
    const t0 = performance.now();
    slider.value = String(pos);
    slider.dispatchEvent(new Event('input', { bubbles: true }));
    const late = new Promise((_, reject) =>
      setTimeout(() => reject(new Error('no answer in 30 s')), 30000));
    await Promise.race([seen, late]);
    await frame();
    times.push(performance.now() - t0);
  }
  return times;
}"""

DRAWN = """([index, want]) => {
  const roots = document.querySelectorAll('.nnx-calibration');
  const fig = roots[index] && roots[index].querySelector('[data-testid="reliability-chart"]');
  return !!fig && fig.dataset.temperature === want;
}"""


def notebook(cells: list[str]) -> dict:
    return {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": c,
                "outputs": [],
                "execution_count": None,
            }
            for c in cells
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


class Wire:
    """Bytes on the kernel's websocket, both directions, as the page sees them."""

    def __init__(self, page) -> None:
        self.bytes = 0
        page.on("websocket", self._socket)

    def _socket(self, ws) -> None:
        if "/channels" not in ws.url:
            return
        ws.on("framereceived", self._frame)
        ws.on("framesent", self._frame)

    def _frame(self, payload) -> None:
        self.bytes += len(payload)


def run_size(browser, server, root, rows, classes, rounds, moves) -> dict:
    name = f"explorer_slider_{rows}x{classes}.ipynb"
    setup = SETUP.format(rows=rows, classes=classes)
    (root / name).write_text(
        json.dumps(notebook([setup, "kernel_design", "browser_design", "abstention"]))
    )
    lab = open_lab(browser, server)
    wire = Wire(lab.page)
    page = lab.page
    lab.open_notebook(name)
    before = wire.bytes
    lab.run_all(timeout=300_000)
    for index, _design in enumerate(DESIGNS):
        page.wait_for_function(DRAWN, arg=[index, "1"], timeout=300_000)
    load_bytes = wire.bytes - before
    page.wait_for_function(
        "() => !!document.querySelector('.nnx-abstention[data-threshold]')", timeout=300_000
    )
    rng = random.Random(0)
    times: dict[str, list[float]] = {d: [] for d in DESIGNS}
    wire_bytes: dict[str, int] = dict.fromkeys(DESIGNS, 0)
    counted: dict[str, int] = dict.fromkeys(DESIGNS, 0)
    for index, _design in enumerate(DESIGNS):  # warm up (JIT, caches)
        page.evaluate(MOVES, [index, [480, 520, 490, 510, 500], *SLIDER])
    page.wait_for_timeout(600)
    for r in range(rounds):
        order = DESIGNS if r % 2 == 0 else DESIGNS[::-1]
        for design in order:
            index = DESIGNS.index(design)
            positions = [rng.randint(350, 750) for _ in range(moves)]
            b0 = wire.bytes
            got = page.evaluate(MOVES, [index, positions, *SLIDER])
            page.wait_for_timeout(600)  # the browser design's write at rest lands here
            wire_bytes[design] += wire.bytes - b0
            counted[design] += len(got)
            times[design] += got
    stops = int(page.locator(".nnx-abstention [data-testid=threshold]").get_attribute("max"))
    threshold_times: list[float] = []
    b0 = wire.bytes
    for _ in range(rounds):
        positions = [rng.randint(stops // 4, 3 * stops // 4) for _ in range(moves)]
        threshold_times += page.evaluate(THRESHOLD_MOVES, [positions])
    threshold_bytes = (wire.bytes - b0) / max(1, len(threshold_times))
    lab.page.context.close()
    server.shutdown_kernels()
    t = sorted(threshold_times)
    out = {
        "load_bytes_all": load_bytes,
        "threshold": {
            "median_ms": statistics.median(t),
            "p90_ms": t[int(0.9 * (len(t) - 1))],
            "moves": len(t),
            "bytes_per_move": threshold_bytes,
        },
    }
    for design in DESIGNS:
        t = sorted(times[design])
        out[design] = {
            "median_ms": statistics.median(t),
            "p90_ms": t[int(0.9 * (len(t) - 1))],
            "moves": counted[design],
            "bytes_per_move": wire_bytes[design] / max(1, counted[design]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--moves", type=int, default=15, help="moves per design per round")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    for bundle in ("calibration.js", "abstention.js"):
        if not (REPO / "nnx_lab" / "static" / bundle).exists():
            sys.exit("run `npm run build` first")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        root = tmp / "lab" / "notebooks"
        root.mkdir(parents=True)
        server = JupyterServer.start(root, tmp / "lab" / "jupyter")
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=find_chromium(),
                    headless=True,
                    args=[
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-dev-shm-usage",
                        "--disable-background-networking",
                    ],
                )
                results = {}
                for classes in args.classes:
                    r = run_size(browser, server, root, args.rows, classes, args.rounds, args.moves)
                    results[classes] = r
                    logits_mb = args.rows * classes * 4 / 1e6
                    head = f"{args.rows:,} rows x {classes} classes"
                    print(f"\n{head} (logits buffer {logits_mb:.1f} MB)")
                    for design in DESIGNS:
                        d = r[design]
                        once = (
                            f"; {logits_mb + args.rows * 4 / 1e6:.1f} MB once (logits, targets)"
                            if design == "browser"
                            else ""
                        )
                        print(
                            f"  {design:>7}: per move {d['median_ms']:6.1f} ms median, "
                            f"{d['p90_ms']:6.1f} ms p90 ({d['moves']} moves); "
                            f"{d['bytes_per_move']:9,.0f} bytes/move{once}"
                        )
                    ratio = r["browser"]["median_ms"] / r["kernel"]["median_ms"]
                    print(f"  browser / kernel time per move: x{ratio:.2f}")
                    a = r["threshold"]
                    print(
                        f"  abstention threshold slider (kernel readouts): {a['median_ms']:.1f} ms "
                        f"median, {a['p90_ms']:.1f} ms p90 ({a['moves']} moves); "
                        f"{a['bytes_per_move']:,.0f} bytes/move"
                    )
                browser.close()
        finally:
            server.stop()
            shutil.rmtree(tmp / "lab", ignore_errors=True)


if __name__ == "__main__":
    main()
