"""Issue 29: code written for NNx 0.4.1 behaves the same with ``nnx_lab`` (the behaviour
differences of the engine; docs/nnx_differences.md lists the ones kept on purpose)."""

from __future__ import annotations

import os

import engine_factories as f
import pytest
import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNRun, ProbabilitySpec, ResumeError, RunRecordError
from nnx_lab.errors import DataError, NNxError
from nnx_lab.runs import set_config_report


def _empty_loader() -> DataLoader:
    return DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0).long()), batch_size=4)


@pytest.mark.parametrize("surface", ["predict", "predict_proba"])
def test_an_empty_loader_is_refused_and_the_modes_are_restored(surface):
    model = f.model()
    model.net.train()
    call = getattr(model, surface)
    args = (ProbabilitySpec(kind="categorical"),) if surface == "predict_proba" else ()
    with pytest.raises(ValueError, match=rf"{surface}\(\) loader produced zero batches"):
        call(_empty_loader(), *args)
    assert model.net.training
    with pytest.raises(DataError, match="zero batches"):
        call([], *args)  # an empty list of batches is a loader too
    # an empty tensor is an empty question: an empty answer
    assert len(model.predict(torch.zeros(0, 8))) == 0


def test_an_unreadable_input_is_a_type_error():
    model = f.model()
    for bad in ([object()], object()):
        with pytest.raises(TypeError) as caught:
            model.predict(X=bad)
        assert isinstance(caught.value, DataError)  # and still the ValueError it was


def test_resuming_a_missing_run_is_a_value_error_and_still_file_not_found(runs_root):
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1, resume_from_run_id="0" * 32)
    with pytest.raises(ValueError, match="no such run") as caught:
        model.train(params)
    assert isinstance(caught.value, ResumeError)
    assert isinstance(caught.value, FileNotFoundError)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_python_tag_in_run_yaml_is_a_yaml_error_and_a_run_record_error(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=1))
    path = run.run_dir / "run.yaml"
    path.write_text("a: !!python/object/apply:os.system ['echo no']\n")
    with pytest.raises(yaml.YAMLError) as caught:
        NNRun.load(run.id, runs_root=runs_root)
    assert isinstance(caught.value, RunRecordError)


def test_a_nan_fp32_loss_raises_before_the_weights_change(runs_root):
    X = torch.randn(64, 8)
    y = torch.randint(0, 3, (64,))
    X[40] = float("nan")  # batch 2 of 32 rows
    batches = [(X[:32], y[:32]), (X[32:], y[32:])]
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1, train_loader=batches, val_loader=None)
    before = {}

    class Keep:
        def on_step_ended(self, event):
            before.update({k: v.clone() for k, v in model.net.state_dict().items()})

    with pytest.raises(FloatingPointError, match="non-finite training loss at step 2") as caught:
        model.train(params, callbacks=[Keep()])
    assert isinstance(caught.value, NNxError)
    after = model.net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after)  # step 2 never applied
    assert all(bool(torch.isfinite(v).all()) for v in after.values())


def test_train_ends_with_the_run_saved_line(runs_root, capsys, monkeypatch):
    set_config_report(None)
    try:
        monkeypatch.chdir(runs_root.parent)
        run = f.model().train(f.train_params("runs", n_epochs=1))
        out = capsys.readouterr().out
        assert f"Run saved to runs/{run.id} (relative to the working directory)" in out
        set_config_report(False)  # the switch every printed report follows
        f.model().train(f.train_params("runs", n_epochs=1, overwrite_existing=True))
        assert "Run saved" not in capsys.readouterr().out
    finally:
        set_config_report(None)
    assert os.path.isdir(runs_root / run.id)
