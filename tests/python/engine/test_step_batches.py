"""Under ``objective=`` or ``train_step_fn=`` a batch belongs to the step: any structure
reaches it as the loader gave it, on the model's device; a step's own ``check(model,
params)`` refuses before any run directory exists."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from nnx_lab import (
    EDP,
    LossTerm,
    NNModel,
    NNOptimParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
)
from nnx_lab.errors import ConfigError, DataError


class AutoEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Linear(4, 2)
        self.dec = torch.nn.Linear(2, 4)

    def forward(self, x):
        return self.dec(self.enc(x))


class Reconstruction(Objective):
    """Squared error per element; records what each batch looked like."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def compute(self, net, batch, ctx):
        self.seen.append(batch)
        x = batch["x"] if isinstance(batch, dict) else batch[0]
        err = ((net(x) - x) ** 2).sum()
        return ObjectiveResult([LossTerm("recon", err, x.numel())])


def _rows():
    return torch.randn(48, 4, generator=torch.Generator().manual_seed(0))


def _params(root, loader, n_epochs=1, **kw):
    return NNTrainParams(
        n_epochs=n_epochs,
        train_loader=loader,
        optim=NNOptimParams(max_lr=1e-2),
        runs_root=str(root),
        progress=False,
        **kw,
    )


def _shuffled(dataset):
    return DataLoader(
        dataset, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1)
    )


class Dicts(Dataset):
    def __init__(self, X):
        self.X = X

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return {"x": self.X[i], "row": i}


def _steps(run):
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(x["step"], x["loss"], x["samples"]) for x in lines if x["event"] == "step"]


def test_a_one_tensor_batch_reaches_the_objective_as_the_loader_gave_it(tmp_path):
    X = _rows()
    objective = Reconstruction()
    run = NNModel(module=AutoEncoder()).train(
        _params(tmp_path, _shuffled(TensorDataset(X)), log_every=1), objective=objective
    )
    first = objective.seen[0]
    assert isinstance(first, list)
    assert len(first) == 1
    # the loader's own first batch, in its shuffled order
    expected = next(iter(_shuffled(TensorDataset(X))))[0]
    assert torch.equal(first[0], expected)
    steps = _steps(run)
    assert [s[2] for s in steps] == [16, 16, 16]  # rows are counted from the batch
    assert all(s[1] > 0 for s in steps)


def test_dict_batches_with_non_tensor_values_reach_a_train_step_fn(tmp_path):
    X = _rows()
    seen = []

    def step(ctx):
        batch = ctx.batch
        seen.append(batch)
        ctx.optimizer.zero_grad()
        loss = ((ctx.model(batch["x"]) - batch["x"]) ** 2).mean()
        loss.backward()
        ctx.optimizer.step()
        ctx.report_update()
        return EDP(loss=float(loss.detach()), samples=int(batch["x"].shape[0]))

    loader = DataLoader(Dicts(X), batch_size=12)
    run = NNModel(module=AutoEncoder()).train(
        _params(tmp_path, loader, data_id="dict-rows-v1"), train_step_fn=step
    )
    assert len(seen) == 4
    assert set(seen[0]) == {"x", "row"}
    assert torch.equal(seen[0]["row"], torch.arange(12))
    assert torch.equal(seen[1]["x"], X[12:24])
    assert run.status.value == "finished"


def test_step_owned_batches_resume_bit_for_bit(tmp_path):
    X = _rows()

    def train(n, **kw):
        model = NNModel(module=AutoEncoder())
        return model, model.train(
            _params(tmp_path, _shuffled(TensorDataset(X)), n, log_every=1, **kw),
            objective=Reconstruction(),
        )

    full_model, full = train(4)
    _, first = train(2)
    resumed_model, resumed = train(2, resume_from_run_id=first.id)
    assert _steps(resumed) == _steps(full)
    for name, weight in full_model.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[name]), name


def test_pair_batches_still_reach_the_objective_as_an_x_y_pair(tmp_path):
    X = _rows()
    objective = Reconstruction()
    y = torch.arange(48) % 4
    NNModel(module=AutoEncoder()).train(
        _params(tmp_path, DataLoader(TensorDataset(X, y), batch_size=16)), objective=objective
    )
    first = objective.seen[0]  # checked against the model's task as before
    assert isinstance(first, tuple)
    assert len(first) == 2
    assert torch.equal(first[0], X[:16])
    assert torch.equal(first[1], y[:16])


def test_unscored_validation_batches_need_an_eval_step_fn_before_any_run(tmp_path):
    loader = DataLoader(TensorDataset(_rows()), batch_size=16)
    root = tmp_path / "runs"
    with pytest.raises(ConfigError, match="eval_step_fn") as caught:
        NNModel(module=AutoEncoder()).train(
            _params(root, loader, val_loader=loader), objective=Reconstruction()
        )
    assert "val_loader=None" in str(caught.value)
    assert not root.exists()

    def eval_step(ctx):
        with torch.no_grad():
            total = sum(float(((ctx.model(x) - x) ** 2).sum()) for (x,) in ctx.val_loader)
        return EDP(loss=total / (48 * 4), samples=48)

    run = NNModel(module=AutoEncoder()).train(
        _params(root, loader, n_epochs=2, val_loader=loader),
        objective=Reconstruction(),
        eval_step_fn=eval_step,
    )
    vals = [e["val"] for e in run.epochs]
    assert len(vals) == 2
    assert all(v["samples"] == 48 and v["loss"] > 0 for v in vals)


def test_a_step_check_refuses_before_any_run_and_sees_the_users_loader(tmp_path):
    loader = DataLoader(TensorDataset(_rows()), batch_size=16)
    seen = {}

    class Refusing(Reconstruction):
        def check(self, model, params):
            seen["model"], seen["loader"] = model, params.train_loader
            raise DataError("objective", "4 columns", "pass 5 columns")

    def step(ctx):  # a function with its own check attribute
        raise AssertionError("never called")

    step.check = lambda model, params: (_ for _ in ()).throw(ConfigError("step", 1, "no"))

    root = tmp_path / "runs"
    model = NNModel(module=AutoEncoder())
    with pytest.raises(DataError, match="pass 5 columns"):
        model.train(_params(root, loader), objective=Refusing())
    assert seen["model"] is model
    assert seen["loader"] is loader
    with pytest.raises(ConfigError, match="no"):
        model.train(_params(root, loader), train_step_fn=step)
    assert not root.exists()


def test_a_batch_without_a_row_axis_is_refused_by_name(tmp_path):
    loader = [{"x": 1.0}, {"x": 2.0}]
    with pytest.raises(DataError, match="holds no tensor with a row axis"):
        NNModel(module=AutoEncoder()).train(_params(tmp_path, loader), objective=Reconstruction())
