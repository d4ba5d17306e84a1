"""Page reloads while a widget's background work runs: the view comes back and goes on.

* GenerationPlayground, a callback of a language-model run trained in the background
  (``TrainingMonitor.fit``): it draws continuations at every epoch's end. After each
  reload the page shows the kernel's continuations and settings again, and the epoch
  they were drawn after keeps rising (the view is live, not a frozen copy).
* The monitor's gradient-health heatmap (``TrainingMonitor(health=True)``): after each
  reload the heatmap is drawn again, one row per parameter tensor, and the latest sampled
  step under the pointer keeps rising while the run trains. Stop then ends the run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from lab_harness import JupyterServer, Lab, write_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")

RUN_TIMEOUT = 120_000  # ms
RELOADS = 2

PLAYGROUND = """
from nnx_lab import (
    GenerativeNNModel, Nets, NNModelParams, NNOptimParams, NNTrainParams,
    NNTransformerParams, TrainingMonitor,
)
from nnx_lab.lm_tasks import CausalLMTask, CharTokenizer, lm_loaders, toy_corpus
from nnx_lab.widgets import GenerationPlayground

texts = toy_corpus(120, seed=0)
tokenizer = CharTokenizer.from_texts(texts)
train, val = lm_loaders(texts, tokenizer, length=17, batch_size=32, val_fraction=0.1)
task = CausalLMTask(tokenizer.vocab_size, alignment="shift_inputs")
net = NNTransformerParams(
    vocab_size=tokenizer.vocab_size, n_layers=1, d_model=16, n_heads=2, max_seq_len=16
)
model = GenerativeNNModel(net, NNModelParams(net=Nets.TRANSFORMER))
playground = GenerationPlayground(model, tokenizer, "a ", n=2, max_new_tokens=12)
monitor = TrainingMonitor()
params = NNTrainParams(
    n_epochs=100_000, seed=0, train_loader=train, val_loader=val,
    optim=NNOptimParams(max_lr=5e-3), overwrite_existing=True,
)
monitor.fit(
    model, params, callbacks=[playground],
    objective=task.objective(), eval_step_fn=task.eval_step(),
)
display(monitor, playground)
"""

HEALTH = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from nnx_lab import HealthProbe, Nets, NNModel, NNModelParams, NNOptimParams, NNParams
from nnx_lab import NNTrainParams, TrainingMonitor

g = torch.Generator().manual_seed(0)
X, y = torch.randn(128, 8, generator=g), torch.randint(0, 3, (128,), generator=g)
loader = DataLoader(TensorDataset(X, y), batch_size=32)
net = NNParams(input_dim=8, output_dim=3, hidden_dims=[16])
model = NNModel(net, NNModelParams(net=Nets.FEED_FWD))
monitor = TrainingMonitor(health=HealthProbe(every=5))
params = NNTrainParams(
    n_epochs=100_000, seed=0, train_loader=loader, val_loader=loader,
    optim=NNOptimParams(max_lr=1e-3), overwrite_existing=True,
)
monitor.fit(model, params)
monitor
"""


def _epoch_of(status_text: str) -> int:
    match = re.search(r"drawn after epoch (\d+)", status_text)
    return int(match.group(1)) if match else 0


def _wait_epoch_above(lab: Lab, status, epoch: int) -> None:
    lab.page.wait_for_function(
        "([el, e]) => Number((el.textContent.match(/after epoch (\\d+)/) || [0, 0])[1]) > e",
        arg=[status.element_handle(), epoch],
        timeout=RUN_TIMEOUT,
    )


def _stop(lab: Lab, lab_root: Path) -> None:
    monitor = lab.page.locator(".nnx-monitor").first
    monitor.get_by_test_id("stop").click()
    expect(monitor.get_by_test_id("status")).to_have_text("stopped", timeout=RUN_TIMEOUT)
    run_id = monitor.get_by_test_id("run-id").text_content().strip()
    meta = yaml.safe_load((lab_root / "runs" / run_id / "metadata.yaml").read_text())
    assert meta["status"] == "stopped"


def _start(lab: Lab, lab_root: Path, name: str, source: str) -> None:
    """Write, open and run the one-cell notebook ``name``, then save it."""
    write_notebook(lab_root / name, [source])
    lab.open_notebook(name)
    lab.run_all()  # fit() returns at once: the run goes on in a thread
    assert lab.tracebacks() == []
    lab.save()  # the outputs with the widgets must be in the file to come back


def test_the_playground_comes_back_after_reloads_and_goes_on_drawing(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    try:
        _start(lab, lab_root, "playground_reload.ipynb", PLAYGROUND)  # the draws go on
        seen = 0
        for attempt in range(RELOADS + 1):
            pg = lab.page.locator(".nnx-pg").first
            status = pg.get_by_test_id("status")
            # drawn again after an epoch later than any seen before the reload
            _wait_epoch_above(lab, status, seen)
            seen = _epoch_of(status.text_content())
            expect(pg.get_by_test_id("sample")).to_have_count(2)
            for card in pg.get_by_test_id("sample").all():
                expect(card.get_by_test_id("token").first).to_be_visible()
                # each token's hover names its probability and the likeliest tokens
                tip = card.get_by_test_id("token").first.get_attribute("title")
                assert re.search(r"p = [\d.]+%; most likely: ", tip), tip
            # the kernel's settings, not the inputs' defaults
            expect(pg.get_by_test_id("prompt")).to_have_value("a ")
            expect(pg.get_by_test_id("n")).to_have_value("2")
            expect(pg.get_by_test_id("max_new_tokens")).to_have_value("12")
            if attempt < RELOADS:
                lab.reload()
        # still live after the last reload: the next epoch's draw reaches the page
        _wait_epoch_above(lab, status, seen)
        _stop(lab, lab_root)
        assert lab.tracebacks() == []
    finally:
        jupyter_server.shutdown_kernels()


_HEAD = re.compile(r"^Gradient health: no problem in (\d+) samples \(to step ([\d,]+)\)$")
_TIP_STEP = re.compile(r"^(\S+) at step (\d+): gradient norm ")


def _latest_step(lab: Lab, canvas) -> int:
    """Hover the heatmap's last column, first row; the tip names its step."""
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    lab.page.mouse.move(box["x"] + 1, box["y"] + 3)  # a move off the last column first
    lab.page.mouse.move(box["x"] + box["width"] - 1, box["y"] + 3)
    tip = lab.page.locator(".nnx-monitor").first.get_by_test_id("health-tip")
    expect(tip).to_have_text(_TIP_STEP)
    return int(_TIP_STEP.match(tip.text_content()).group(2))


# the opaque pixels of a canvas (the drawn cells)
_DRAWN = """c => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 200) n++;
    return n;
}"""


def test_the_health_heatmap_comes_back_after_reloads_and_goes_on(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    try:
        _start(lab, lab_root, "health_reload.ipynb", HEALTH)
        seen = -1
        for attempt in range(RELOADS + 1):
            monitor = lab.page.locator(".nnx-monitor").first
            expect(monitor.get_by_test_id("status")).to_have_text("running", timeout=RUN_TIMEOUT)
            panel = monitor.get_by_test_id("health")
            expect(panel).to_be_visible(timeout=RUN_TIMEOUT)
            head = monitor.get_by_test_id("health-head")
            # a small net at a small rate: nothing vanishes or explodes
            expect(head).to_have_text(_HEAD, timeout=RUN_TIMEOUT)
            canvas = monitor.get_by_test_id("health-canvas")
            # one 12-pixel row per parameter tensor: two linear layers, weight and bias
            expect(canvas).to_have_attribute("height", str(4 * 12))
            assert canvas.evaluate(_DRAWN) > 0.85 * 720 * 4 * 12  # every cell drawn (11 of 12 rows)
            # the heatmap reaches further than before the reload: the run goes on
            lab.page.wait_for_function(
                "([el, s]) => Number((el.textContent.match(/to step ([\\d,]+)/) || [0, '0'])[1]"
                ".replace(/,/g, '')) > s",
                arg=[head.element_handle(), seen],
                timeout=RUN_TIMEOUT,
            )
            seen = int(_HEAD.match(head.text_content()).group(2).replace(",", ""))
            # the pointer over the last column names the latest sampled step
            assert _latest_step(lab, canvas) >= seen
            if attempt < RELOADS:
                lab.reload()
        _stop(lab, lab_root)
        assert lab.tracebacks() == []
    finally:
        jupyter_server.shutdown_kernels()
