"""Figures a callback hands the monitor per epoch (``control.show_figure`` /
``ctx.show_figure``): shown live, kept in the run folder as data, back on reload."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Devices, Losses, Nets, NNModel, NNModelParams, NNParams, NNTrainParams
from nnx_lab.engine.events import TrainingControl
from nnx_lab.engine.sinks import Callback
from nnx_lab.runs import figure_event, list_figures, read_figure
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(autouse=True)
def _no_bar(monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")


def _png(shade: int) -> bytes:
    """A real 2x2 grey PNG, written by hand (no imaging package needed)."""

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    rows = b"".join(b"\x00" + bytes([shade, shade]) for _ in range(2))
    head = struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class Samples(Callback):
    """Each epoch: a PNG, and a scatter of the network's outputs (a generator's samples)."""

    def on_attach(self, control: TrainingControl) -> None:
        self.control = control

    def on_epoch_ended(self, event) -> None:
        self.control.show_figure("recon", event.epoch, "png", _png(40 * event.epoch))
        points = torch.arange(6.0).reshape(3, 2) * event.epoch
        self.control.show_figure("samples", event.epoch, "scatter", points)


class NNxStyle:
    """NNx's hook with its context: ctx.show_figure for the epoch that just ended."""

    def on_epoch_end(self, ctx) -> None:
        ctx.show_figure("curve", "plotly", {"data": [{"x": [1, 2], "y": [ctx.epoch, 0]}]})


def _train(tmp_path, monitor, callbacks, n_epochs=2):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    y = (X[:, 0] > 0).long()
    model = NNModel(
        net_params=NNParams(input_dim=4, output_dim=2, hidden_dims=[8]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    params = NNTrainParams(n_epochs=n_epochs, train_loader=loader, runs_root=str(tmp_path))
    return model.train(params=params, callbacks=[*callbacks, monitor])


def _ask(fe: FakeFrontend, name: str, epoch: int) -> tuple[dict, list]:
    fe.clear()
    fe.widget._dispatch_frontend_msg(
        fe.widget, {"kind": "figure", "view": fe.view, "name": name, "epoch": epoch}, []
    )
    content, buffers = fe.custom_with_buffers()[-1]
    assert content["kind"] == "figure_data"
    assert content["to"] == fe.view
    return content, buffers


def test_figures_are_shown_live_kept_in_the_run_folder_and_back_on_reload(tmp_path):
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    run = _train(tmp_path, monitor, [Samples(), NNxStyle()])
    listed = [(f["name"], f["epoch"], f["kind"]) for f in monitor.figures]
    assert listed == [
        ("curve", 1, "plotly"),
        ("curve", 2, "plotly"),
        ("recon", 1, "png"),
        ("recon", 2, "png"),
        ("samples", 1, "scatter"),
        ("samples", 2, "scatter"),
    ]
    content, buffers = _ask(fe, "recon", 2)
    assert content["figure_kind"] == "png"
    assert bytes(buffers[0]) == _png(80)
    content, buffers = _ask(fe, "samples", 2)
    assert json.loads(bytes(buffers[0])) == {"x": [0.0, 4.0, 8.0], "y": [2.0, 6.0, 10.0]}
    # in the run folder, as data files, listed by name alone
    entries = list_figures(run.run_dir)
    assert [(e.name, e.epoch, e.kind) for e in entries] == listed
    assert read_figure(entries[2]) == _png(40)
    assert json.loads(read_figure(entries[1]))["data"][0]["y"] == [2, 0]
    # a reloaded monitor lists them and reads one when a view asks
    replay = TrainingMonitor.from_run(run.id, runs_root=tmp_path)
    try:
        assert [(f["name"], f["epoch"], f["kind"]) for f in replay.figures] == listed
        content, buffers = _ask(FakeFrontend(replay), "recon", 1)
        assert bytes(buffers[0]) == _png(40)
    finally:
        replay.close()
        monitor.close()


def test_a_bad_figure_is_refused_before_anything_is_shown_or_written(tmp_path):
    class Bad(Callback):
        def on_attach(self, control):
            self.control = control

        def on_epoch_ended(self, event):
            self.control.show_figure("recon", event.epoch, "png", b"not a png")

    monitor = TrainingMonitor()
    with pytest.raises(ValueError, match="PNG signature"):
        _train(tmp_path, monitor, [Bad()], n_epochs=1)
    assert monitor.figures == []
    assert not list(tmp_path.glob("*/figures"))
    monitor.close()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("../x", 1, "png", b""), "figure name='../x'"),
        (("a", -1, "png", b""), "figure epoch=-1"),
        (("a", 1, "svg", b""), "figure kind='svg'"),
        (("a", 1, "png", "text"), "PNG's bytes"),
        (("a", 1, "scatter", {"x": [1, 2], "y": [1]}), "one value per point"),
        (("a", 1, "scatter", {"x": ["a"], "y": [1]}), "numbers"),
        (("a", 1, "scatter", {"y": [1]}), "'x'"),
        (("a", 1, "plotly", "{not json"), "does not parse"),
        (("a", 1, "png", b"\x89PNG\r\n\x1a\n" + b"0" * (4 * 1024 * 1024)), "more than"),
    ],
)
def test_figure_event_names_the_field_and_the_fix(args, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace("[", r"\[")):
        figure_event(*args)


def test_show_figure_outside_a_running_loop_says_so():
    with pytest.raises(RuntimeError, match="running loop"):
        TrainingControl().show_figure("a", 1, "png", _png(1))


def test_the_run_folder_listing_leaves_out_what_is_no_figure(tmp_path):
    (tmp_path / "figures" / "recon").mkdir(parents=True)
    (tmp_path / "figures" / "recon" / "000001.png").write_bytes(_png(1))
    (tmp_path / "figures" / "recon" / "notes.txt").write_text("x")
    (tmp_path / "figures" / "recon" / "000002.png").write_bytes(b"junk")
    (tmp_path / "figures" / ".hidden").mkdir()
    entries = list_figures(tmp_path)
    assert [(e.name, e.epoch) for e in entries] == [("recon", 1), ("recon", 2)]
    with pytest.raises(ValueError, match="not a PNG"):
        read_figure(entries[1])
