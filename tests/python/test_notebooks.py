"""Every notebook in notebooks/ runs headless, top to bottom, without an error.

Each notebook is executed with nbclient in a python3 kernel whose working directory is a
temporary copy of notebooks/, so its runs/ land there. Notebooks that start a background
run (``monitor.fit``) get extra cells appended that stop the run the way the Stop button
would and check that it ended cleanly, so the execution terminates.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path

import nbclient
import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
BUNDLE = REPO / "nnx_lab" / "static" / "monitor.js"
CELL_TIMEOUT = 300  # s

# Appended to notebooks that leave a run going in a background thread.
STOP_CELLS = {
    "monitor_stop.ipynb": """
import time

_deadline = time.monotonic() + 120
while monitor2.status != "running" and time.monotonic() < _deadline:
    time.sleep(0.05)
assert monitor2.status == "running", monitor2.status
time.sleep(0.5)  # let it take a few steps
monitor2.stop("stopped by tests/python/test_notebooks.py")
_run = monitor2.wait(timeout=120)
assert monitor2.status == "stopped", monitor2.status
print(f"STOPPED {_run.id}")
""",
}

STOPPED = re.compile(r"STOPPED (\S+)")
TRAINED = re.compile(r"trained (\d+) iterations; saved under runs/([^/\s]+)/")


def _execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    extra = STOP_CELLS.get(path.name)
    if extra:
        nb.cells.append(nbformat.v4.new_code_cell(extra.strip()))
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        startup_timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return nb


def _stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


def test_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "monitor_stop.ipynb", "calibration_and_abstention.ipynb"} <= names


def test_notebooks_are_committed_without_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name}: clear the outputs before committing"
                assert cell.execution_count is None, f"{path.name}: clear the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_headless(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if not BUNDLE.exists():
        pytest.fail("nnx_lab/static/monitor.js is missing: run `npm run build`", pytrace=False)
    workdir = tmp_path / "notebooks"
    shutil.copytree(path.parent, workdir, ignore=shutil.ignore_patterns("runs", ".ipynb*"))
    # The kernel inherits this environment: no progress bars, runs under workdir, and
    # nnx_lab importable from this checkout even when it is not installed.
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")
    monkeypatch.setenv("NNX_RUNS_ROOT", str(workdir / "runs"))  # the notebook's ./runs
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    )

    nb = _execute(path, workdir)

    errors = [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert errors == []
    text = _stdout(nb)
    if path.name == "quickstart.ipynb":
        match = TRAINED.search(text)
        assert match, text
        assert int(match.group(1)) > 0
        assert (workdir / "runs" / match.group(2) / "checkpoints" / "last.json").is_file()
        test = re.search(r"predicted 26 samples; test accuracy ([\d.]+)", text)
        assert test, text
        assert float(test.group(1)) >= 0.85, text  # it learns: chance is a third
    if path.name == "tabular_regression.ipynb":
        found = re.search(r"test MAE ([\d.]+) \(predicting the training mean: ([\d.]+)\)", text)
        assert found, text
        assert float(found.group(1)) < 0.8 * float(found.group(2)), text  # it learns
        assert "decision " in text
        assert (workdir / "diabetes_split.json").is_file()
        assert (workdir / "diabetes_standardizer.json").is_file()
        # the DatasetSummary's text repr: the regression's splits and target range
        assert re.search(
            r"DatasetSummary\(NNTabularDataset: regression, 10 features; train=\d+ \(\d+%\), "
            r"val=\d+ \(\d+%\), test=\d+ \(\d+%\); train target [\d.]+ \.\. [\d.]+",
            text,
        ), text
    if path.name == "images_cnn.ipynb":
        # the MLP and the CNN raced in one monitor, each its own run, and both learned
        raced = re.findall(r"^(MLP|CNN): validation error ([\d.]+) \(run (\w{8})\)$", text, re.M)
        assert [name for name, _, _ in raced] == ["MLP", "CNN"], text
        assert len({run for _, _, run in raced}) == 2, text
        assert all(float(error) < 0.2 for _, error, _ in raced), text  # chance: 0.9
    if path.name == "plans_and_drift.ipynb":
        # the form refused a value and kept its plan
        assert "train.optim.max_lr=-1: pass a learning rate > 0" in text, text
        assert "the plan's learning rate is still 0.003" in text, text
        # three branches raced; each finished with its own run
        raced = re.findall(
            r"^\s*(baseline|high lr|wide, high lr): val loss ([\d.]+), .* run (\w+)$", text, re.M
        )
        assert [name for name, _, _ in raced] == ["baseline", "high lr", "wide, high lr"], text
        assert len({run for _, _, run in raced}) == 3
        winner = re.search(r"^winner: (.+)$", text, re.M)
        assert winner, text
        losses = {name: float(loss) for name, loss, _ in raced}
        assert losses[winner.group(1)] == min(losses.values())
    if path.name == "lr_finder.ipynb":
        # the suggestion was picked, handed to the builder, and trained better than 0.001
        picked = re.search(r"^picked lr ([\d.e-]+)$", text, re.M)
        assert picked, text
        assert f"the builder's learning rate is now {picked.group(1)}" in text, text
        losses = dict(re.findall(r"^\s*(picked|default 0\.001): val loss ([\d.]+)", text, re.M))
        assert float(losses["picked"]) < float(losses["default 0.001"]), text
    if path.name == "calibration_and_abstention.ipynb":
        _check_calibration_notebook(text, workdir)
    if path.name == "inside_a_run.ipynb":  # its interpretation section
        # the CNN's BEST checkpoint on the test split, and the regression's residuals
        assert re.search(r"^run \w{8} \(best\) on 'test': 271 rows, \d+ mistakes$", text, re.M)
        assert re.search(r"^the policy declines \d+ of the 24 top losses$", text, re.M), text
        assert re.search(r"^a model on 'test': 92 rows, MAE [\d.]+$", text, re.M), text
    if path.name == "inside_a_run.ipynb":  # its sweep section
        # twelve trials raced, the best branched into the builder, then all read back
        assert re.search(r"^Sweep: 12 of 12 trials done; best trial \d+ ", text, re.M), text
        assert (
            len(re.findall(r"^trial +\d+ seed \d+: .*\(finished, run \w{8}\)$", text, re.M)) == 12
        )
        assert "reused: 12" in text, text
        assert "same best: True" in text, text
    if path.name == "custom_training.ipynb":
        _check_vae_section(text, workdir)
        _check_finetuning_section(text)
        _check_gan_section(text, workdir)
    if path.name == "share_a_run.ipynb":
        _check_share_notebook(text, workdir)
    if path.name == "diffusion_2d.ipynb":
        _check_diffusion_notebook(text, workdir)
    if path.name == "tiny_language_model.ipynb":
        _check_lm_notebook(text, workdir)
    if path.name == "ranking_and_graphs.ipynb":
        _check_ranking_section(text, workdir)
        _check_graphs_section(text, workdir)
    if path.name == "inside_a_run.ipynb":
        # the bad init's gradients vanish in the first layer; He init fixes it and learns
        assert "bad init: the gradient of layers.0.weight vanished at step 1" in text, text
        assert "fixed init: problems None" in text, text
        error = re.search(r"fixed init: .*validation error ([\d.]+)", text)
        assert error, text
        assert float(error.group(1)) < 0.5, text  # chance: 0.9
        assert "layers.4.weight, layers.4.bias are frozen" in text, text
        assert "gradients after the fix: pass" in text, text
    if path.name == "distillation_and_lora.ipynb":
        _check_distillation_notebook(text, workdir)
    if path.name in STOP_CELLS:
        match = STOPPED.search(text)
        assert match, text
        run_dir = workdir / "runs" / match.group(1)
        assert (run_dir / "checkpoints" / "last.json").is_file()
        assert yaml.safe_load((run_dir / "metadata.yaml").read_text())["status"] == "stopped"


def _check_graphs_section(text: str, workdir: Path) -> None:
    """Node, graph and link runs recorded; their printed scores in range."""
    for kind in ("node", "graph"):
        found = re.search(rf"^{kind} run (\w+): (?:test|val) accuracy ([\d.]+)", text, re.M)
        assert found, text
        assert (workdir / "runs" / found.group(1) / "metrics.jsonl").is_file()
        assert 0.0 <= float(found.group(2)) <= 1.0, text
    link = re.search(r"^\{.*'auroc': ([\d.]+)", text, re.M)
    assert link, text
    assert 0.5 < float(link.group(1)) <= 1.0, text  # the links score better than chance


def _check_lm_notebook(text: str, workdir: Path) -> None:
    """Perplexity per epoch, down; the playground redrawn each epoch; the cache agrees."""
    shown = re.findall(r"^epoch (\d+): perplexity ([\d.]+); the (.*)$", text, re.M)
    assert [int(e) for e, _, _ in shown] == list(range(1, 7)), text
    perplexities = [float(p) for _, p, _ in shown]
    assert perplexities[-1] < 0.5 * perplexities[0], text
    assert "playground, epoch 6" in text, text
    assert "greedy, cached == uncached: True" in text, text
    assert "same seed, same text: True ; global RNG untouched: True" in text, text
    found = re.search(r"^LM run (\w+)$", text, re.M)
    assert found, text
    lines = (workdir / "runs" / found.group(1) / "metrics.jsonl").read_text().splitlines()
    epochs = [json.loads(ln) for ln in lines if '"epoch_ended"' in ln]
    assert [set(e["val"]["metrics"]) for e in epochs] == [{"perplexity", "token_accuracy"}] * 6
    assert all(e["val"].get("precision") is None for e in epochs)
    assert (workdir / "vocab.json").is_file()


def _check_ranking_section(text: str, workdir: Path) -> None:
    """NDCG@k per epoch in the log and the monitor, BEST at the highest NDCG@10, learned."""
    found = re.search(r"^ranking run (\w+)$", text, re.M)
    assert found, text
    run_dir = workdir / "runs" / found.group(1)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epochs = [ln for ln in lines if ln["event"] == "epoch_ended"]
    assert len(epochs) == 8, text
    ndcg = [e["val"]["metrics"]["ndcg_at_10"] for e in epochs]
    assert all(e["selection"]["metric"] == "ndcg_at_10" for e in epochs)
    assert all(e["val"]["extra"]["excluded_queries"] > 0 for e in epochs)  # counted
    untrained = re.search(r"^untrained NDCG@10: ([\d.]+)$", text, re.M)
    assert untrained, text
    assert ndcg[-1] > float(untrained.group(1)) + 0.1, (ndcg, text)  # it learns to rank
    best = re.search(r"^BEST is epoch (\d+)", text, re.M)
    assert best, text
    assert int(best.group(1)) == ndcg.index(max(ndcg)) + 1, (ndcg, text)
    columns = re.search(r"^monitor epoch columns \(val\): (.+)$", text, re.M)
    assert columns, text
    for key in ("ndcg_at_10", "mrr_at_10", "recall_at_5", "loss"):
        assert f"'{key}'" in columns.group(1), text


def _check_vae_section(text: str, workdir: Path) -> None:
    """Two terms logged per step and per epoch, the loss down, a figure per epoch."""
    from nnx_lab.runs import list_figures, read_figure

    found = re.search(r"^VAE run (\w+)$", text, re.M)
    assert found, text
    run_dir = workdir / "runs" / found.group(1)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [ln for ln in lines if ln["event"] == "step"]
    epochs = [ln for ln in lines if ln["event"] == "epoch_ended"]
    assert len(epochs) == 8, text
    for step in steps:  # each step's loss is its two terms (weights of 1)
        assert set(step["terms"]) == {"recon", "kl"}, step
        assert step["loss"] == pytest.approx(step["terms"]["recon"] + step["terms"]["kl"])
    for epoch in epochs:
        assert set(epoch["train"]["terms"]) == {"recon", "kl"}, epoch
        assert epoch["train"]["terms"]["kl"] > 0, epoch
    assert epochs[-1]["train"]["loss"] < 0.85 * epochs[0]["train"]["loss"], epochs
    assert epochs[-1]["val"]["loss"] < epochs[0]["val"]["loss"], epochs
    shown = re.findall(r"^epoch (\d+): train loss ([\d.]+) = recon ([\d.]+) \+ kl", text, re.M)
    assert [int(e) for e, _, _ in shown] == [1, 8], text
    assert "monitor step series: ['term.kl', 'term.recon']" in text, text
    assert "figures: ['latent', 'reconstructions']" in text, text
    figures = list_figures(run_dir)
    for name, kind in (("reconstructions", "png"), ("latent", "scatter")):
        mine = [f for f in figures if f.name == name]
        assert [f.epoch for f in mine] == list(range(1, 9)), figures
        assert {f.kind for f in mine} == {kind}, figures
    # a whole greyscale image: 20 digits of 8x8 pixels at 4x (its IHDR, then its rows)
    png = read_figure(next(f for f in figures if f.name == "reconstructions"))
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert (width, height, depth, colour) == (320, 64, 8, 0), png[:32]
    (size,) = struct.unpack(">I", png[33:37])
    assert png[37:41] == b"IDAT", png[:48]
    assert len(zlib.decompress(png[41 : 41 + size])) == height * (1 + width)


def _check_diffusion_notebook(text: str, workdir: Path) -> None:
    """The loss logged, a scatter per epoch, samples on the mixture, the chain, the reload."""
    from nnx_lab.runs import list_figures

    found = re.search(r"^diffusion run (\w+)$", text, re.M)
    assert found, text
    run_dir = workdir / "runs" / found.group(1)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epochs = [ln for ln in lines if ln["event"] == "epoch_ended"]
    assert len(epochs) == 80, text
    assert all(set(ln["terms"]) == {"mse"} for ln in lines if ln["event"] == "step")
    assert epochs[-1]["train"]["loss"] < 0.9 * epochs[0]["train"]["loss"], epochs
    figures = [f for f in list_figures(run_dir) if f.name == "samples"]
    assert [f.epoch for f in figures] == list(range(1, 81)), figures
    assert {f.kind for f in figures} == {"scatter"}, figures
    assert "80 preview figures" in text, text
    near = re.search(r"near a mode: noise ([\d.]+), samples ([\d.]+)", text)
    assert near, text
    assert float(near.group(2)) > 0.4, text
    assert float(near.group(2)) > 3 * float(near.group(1)), text
    counts = re.search(r"samples per mode: \[([\d, ]+)\]", text)
    assert counts, text
    assert min(int(c) for c in counts.group(1).split(",")) > 50, text  # every mode found
    assert "chain: (101, 400, 2) (steps T..0, points, dims)" in text, text
    slid = re.search(r"slider at t=0: near a mode ([\d.]+); at t=100: ([\d.]+)", text)
    assert slid, text
    assert float(slid.group(1)) > 3 * float(slid.group(2)), text
    assert "reloaded samples equal: True" in text, text


def _check_gan_section(text: str, workdir: Path) -> None:
    """Two optimizers, each counted per batch, a samples figure per epoch, and a
    generator that covers the ring's modes after training."""
    from nnx_lab.runs import list_figures

    found = re.search(r"^GAN run (\w+)$", text, re.M)
    assert found, text
    run_dir = workdir / "runs" / found.group(1)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [ln for ln in lines if ln["event"] == "step"]
    assert steps[-1]["step"] == 2 * 32 * 12, steps[-1]  # G and D once per batch
    assert all(set(s["lrs"]) == {"G", "D"} for s in steps), steps[0]
    assert [f.epoch for f in list_figures(run_dir) if f.name == "samples"] == list(range(1, 13))
    covered = dict(
        re.findall(
            r"^(before|after) training: median distance [\d.]+, modes covered (\d)", text, re.M
        )
    )
    assert int(covered["before"]) <= 2, text
    assert int(covered["after"]) >= 6, text
    # two GANs raced as TrainJobs: both finished, each its own run, each D at its rate
    raced = re.findall(
        r"^raced (D at ([\d.e-]+)): (\w+), modes covered \d of 8, run (\w+)$", text, re.M
    )
    assert [(name, status) for name, _, status, _ in raced] == [
        ("D at 2e-3", "finished"),
        ("D at 5e-4", "finished"),
    ], text
    for _, d_lr, _, run_id in raced:
        lines = (workdir / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
        steps = [s for s in map(json.loads, lines) if s["event"] == "step"]
        assert steps[-1]["step"] == 2 * 32 * 3, steps[-1]
        assert {s["lrs"]["D"] for s in steps} == {float(d_lr)}, run_id
        assert {s["lrs"]["G"] for s in steps} == {2e-3}, run_id


def _check_finetuning_section(text: str) -> None:
    """0-4 learned, the encoder loaded and frozen, two rules shown, 5-9 learned on it."""
    assert "froze 4 parameters" in text, text
    assert "kept (missing from the source): ('head.1.bias'" in text, text
    assert "head.1.*" in text, text  # the summary's rule column
    assert "weight: default; bias: *.bias" in text, text
    tuned = re.search(r"fine-tuned on 5-9: validation accuracy ([\d.]+)", text)
    assert tuned, text
    assert float(tuned.group(1)) >= 0.8, text  # chance is 0.2
    assert "encoder unchanged: True" in text, text


def _check_calibration_notebook(text: str, workdir: Path) -> None:
    """The classroom story holds: over-confident, T > 1 fitted, better on test, a policy."""
    from nnx_lab.abstention import AbstentionPolicy
    from nnx_lab.calibration import TemperatureCalibrator

    seen = re.search(r"over-confident: accuracy ([\d.]+), mean confidence ([\d.]+)", text)
    assert seen, text
    assert float(seen.group(2)) > float(seen.group(1)) + 0.02, text
    fitted = re.search(r"fitted T = ([\d.]+)", text)
    assert fitted, text
    assert float(fitted.group(1)) > 1.2, text
    assert "test: improved: calibration on 'test'" in text, text
    on_test = re.search(r"policy on test: coverage ([\d.]+), risk ([\d.]+)", text)
    assert on_test, text
    assert float(on_test.group(1)) > 0.3, text
    calibrator = TemperatureCalibrator.load(workdir / "digits_calibrator.json")
    assert calibrator.temperature == pytest.approx(float(fitted.group(1)), abs=1e-3)
    policy = AbstentionPolicy.load(workdir / "digits_policy.json")
    assert policy.calibrated
    assert policy.risk_ceiling == 0.01


def _check_distillation_notebook(text: str, workdir: Path) -> None:
    """The KD run logs soft and hard in every step line (the loss their weighted sum),
    the soft term falls, the teacher is unchanged, and both races report an ECE."""
    assert "teacher unchanged: True" in text, text
    run_id = re.search(r"KD run (\S+)", text).group(1)
    lines = [json.loads(x) for x in (workdir / "runs" / run_id / "metrics.jsonl").open()]
    steps = [x for x in lines if x["event"] == "step"]
    assert steps, text
    for x in steps:
        assert x["loss"] == pytest.approx(
            0.7 * x["terms"]["soft"] + 0.3 * x["terms"]["hard"], rel=1e-5
        )
    epochs = re.findall(r"^epoch \d+: loss [\d.]+, soft ([\d.]+), hard ([\d.]+)", text, re.M)
    assert len(epochs) == 2, text
    assert float(epochs[1][0]) < float(epochs[0][0]), text
    eces = dict(
        re.findall(
            r"^\s*(no mixup|mixup): test accuracy [\d.]+, ECE [\d.]+ -> ([\d.]+)", text, re.M
        )
    )
    assert set(eces) == {"no mixup", "mixup"}, text
    # Mixup against no Mixup raced as two TrainJobs: both finished, the Mixup run's
    # steps from its own step (their lam), the other's from the default step
    raced = re.search(
        r"^\{'no mixup': '(\w+)', 'mixup': '(\w+)'\} \['finished', 'finished'\]$", text, re.M
    )
    assert raced, text
    plain, mixed = (
        [
            x
            for x in map(json.loads, (workdir / "runs" / r / "metrics.jsonl").open())
            if x["event"] == "step"
        ]
        for r in raced.groups()
    )
    assert all("lam" in (x.get("terms") or {}) for x in mixed), mixed[:2]
    assert not any("lam" in (x.get("terms") or {}) for x in plain), plain[:2]


def _check_share_notebook(text: str, workdir: Path) -> None:
    """The bundle rebuilds bit for bit and resumes; TensorBoard and the report exist."""
    from nnx_lab.bundles import validate_bundle

    assert "bit for bit: True" in text, text
    resumed = re.search(r"resumed run (\w+) from (\w+) at epoch 5", text)
    assert resumed, text
    child, parent = resumed.groups()
    assert validate_bundle(workdir / "wine_bundle.zip").run_id == parent
    assert (workdir / "elsewhere" / child / "checkpoints" / "last.json").is_file()
    assert {p.name for p in (workdir / "tb_logs").iterdir()} == {child, parent}
    report = (workdir / "wine_report.html").read_text()
    assert f"Against parent {parent}" in report
