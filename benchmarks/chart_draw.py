"""How long the monitor's charts take to draw as the history grows (run by hand, not a test).

Headless Chromium (the system one, as the browser tests use) loads the built monitor
bundle into a blank page with a stand-in anywidget model, and feeds the real view a
snapshot of N loss points (a noisy decaying loss, one epoch mark every 1,000 steps).
It then measures, median of several repeats:

* draw: the time from handing uPlot the data to the end of its drawing (setData and
  the draw it schedules), for the loss chart alone (raw + smoothed + min/max band);
* update: one live update with 500 new steps as the view handles it: store, smoothed
  line, all three charts redrawn;
* zoom/pan: setting the loss chart's x range (what a drag or a shift-drag does);
* hover: moving the pointer over the loss chart (readout and cursor).

The page script is benchmarks/chart_draw.js. The update time includes waiting for
the next animation frame (16.7 ms at 60 Hz): the view draws on frames.

The figures are compared with the same measurements at 1,000 points in the same run:
the ratio says what 100,000 points cost over a short run.

    python benchmarks/chart_draw.py [--points 1000 10000 100000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from lab_harness import CHROMIUM_ARGS, find_chromium  # noqa: E402

PAGE = """<!doctype html><html><head><style id="css"></style></head>
<body style="width: 1100px"><div id="el"></div></body></html>"""

SCRIPT = (pathlib.Path(__file__).parent / "chart_draw.js").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    bundle = (REPO / "nnx_lab" / "static" / "monitor.js").read_text()
    css = (REPO / "nnx_lab" / "static" / "monitor.css").read_text()
    from playwright.sync_api import sync_playwright

    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.set_content(PAGE)
        for n in sorted(set(args.points) | {1_000}):
            out = page.evaluate(SCRIPT, [bundle, css, n, args.repeats])
            keys = ("draws", "zooms", "updates", "hovers")
            results[n] = {k: statistics.median(out[k]) for k in keys}
            r = results[n]
            print(
                f"{n:>9,} points: draw {r['draws']:6.2f} ms  zoom/pan {r['zooms']:6.2f} ms  "
                f"update (+500 steps, to the drawn frame) {r['updates']:6.2f} ms  "
                f"hover {r['hovers']:5.2f} ms",
                flush=True,
            )
        browser.close()
    base = results[1_000]
    for n in sorted(results):
        if n == 1_000:
            continue
        r = results[n]
        ratios = ", ".join(
            f"{k[:-1]} x{r[k] / base[k]:.1f}" for k in ("draws", "zooms", "updates", "hovers")
        )
        print(f"{n:,} vs 1,000 points: {ratios}")


if __name__ == "__main__":
    main()
