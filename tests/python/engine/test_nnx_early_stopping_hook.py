"""Issue 29: ``EarlyStopping.on_epoch_end(ctx)``, NNx's hook, for code that drives the
callback itself, and an EarlyStopping subclass that overrides it inside a run."""

from __future__ import annotations

from types import SimpleNamespace

import engine_factories as f

from nnx_lab import EDP, EarlyStopping


def _ctx(epoch: int, loss: float) -> SimpleNamespace:
    val = EDP.from_json({"loss": loss, "error": loss})
    return SimpleNamespace(epoch=epoch, val_edp=val, train_summary={}, should_stop=False)


def test_on_epoch_end_counts_epochs_without_improvement_and_sets_should_stop():
    es = EarlyStopping(patience=2)
    losses = [1.0, 0.5, 0.6, 0.7, 0.4]
    seen = []
    for epoch, loss in enumerate(losses, start=1):
        ctx = _ctx(epoch, loss)
        es.on_epoch_end(ctx)
        seen.append((es.counter, ctx.should_stop))
        if ctx.should_stop:
            break
    assert seen == [(0, False), (0, False), (1, False), (2, True)]
    assert (es.best, es.stopped_epoch, es.selected_monitor) == (0.5, 4, "val_edp.error")
    # a monitored training value is read from the context's last iteration data point
    train = EarlyStopping("train_edp.loss", 1)
    idp = SimpleNamespace(train_edp=EDP.from_json({"loss": 2.0, "error": 0.5}))
    ctx = SimpleNamespace(epoch=1, val_edp=None, train_summary={}, idp=idp, should_stop=False)
    train.on_epoch_end(ctx)
    assert train.best == 2.0


class _Recording(EarlyStopping):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.epochs: list[int] = []

    def on_epoch_end(self, ctx):
        self.epochs.append(ctx.epoch)
        super().on_epoch_end(ctx)


def test_a_subclass_overriding_on_epoch_end_counts_each_epoch_once(runs_root):
    plain, recording = EarlyStopping(patience=50), _Recording(patience=50)
    f.model().train(f.train_params(runs_root, n_epochs=4), callbacks=[plain])
    f.model().train(f.train_params(runs_root / "b", n_epochs=4), callbacks=[recording])
    assert recording.epochs == [1, 2, 3, 4]
    # the same run, the same decisions: one count per epoch, not two
    assert (recording.best, recording.counter) == (plain.best, plain.counter)
