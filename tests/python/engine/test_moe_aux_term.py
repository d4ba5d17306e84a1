"""The MoE's load-balancing term is a real term of the training loss (aux_loss): the
step adds it, weighted, before the backward pass, so fp16's gradient scaler scales it
with the loss; the log's ``loss`` stays the task loss and the term is logged beside it."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNTrainParams,
    PrecisionPolicy,
)
from nnx_lab.engine import precision as engine_precision
from nnx_lab.engine.nets_moe import MoENN
from nnx_lab.runs import event_from_json

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MOE = NNMoEParams(
    input_dim=6, output_dim=3, num_experts=3, top_k=1, hidden_dim=8, expert_dim=8, n_layers=2
)


@pytest.fixture
def cpu_fp16(monkeypatch):
    """Let the CPU run fp16 (autocast float16 + a CPU GradScaler), as test_precision does."""
    real = engine_precision.device_can_run

    def can_run(device_type, mode):
        return (True, None) if (device_type, mode) == ("cpu", "fp16") else real(device_type, mode)

    monkeypatch.setattr(engine_precision, "device_can_run", can_run)


def _data(n=96):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 6, generator=g)
    return X, (X[:, 0] > 0).long() + (X[:, 1] > 0).long()


def _model(coef=0.01, precision=None):
    params = NNModelParams(net=Nets.FEED_FWD_MOE, loss=Losses.CROSS_ENTROPY, precision=precision)
    return NNModel(MOE.replace(load_balance_coef=coef), params)


def _train(root, n_epochs=2, n=96, **kw):
    X, y = _data(n)
    return NNTrainParams(
        n_epochs=n_epochs,
        train_loader=DataLoader(TensorDataset(X, y), batch_size=32),
        optim=NNOptimParams(max_lr=0.01),
        runs_root=root,
        checkpoint_every_s=0,
        **kw,
    )


def _lines(run):
    return [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_term_is_logged_beside_the_task_loss_in_steps_and_epochs(runs_root):
    model = _model()
    before = copy.deepcopy(model.net)
    run = model.train(_train(runs_root))
    lines = _lines(run)
    steps = [line for line in lines if line["event"] == "step"]
    epochs = [line for line in lines if line["event"] == "epoch_ended"]
    assert (len(steps), len(epochs)) == (6, 2)
    assert all(s["aux"]["load_balance"] >= 2.0 - 1e-5 for s in steps)  # 1.0 per layer at best
    # The first step's record is the untrained net's on the first batch: `loss` the task
    # loss alone, the term (unweighted, summed over the layers) beside it.
    X, y = _data()
    before.train()
    task_loss = F.cross_entropy(before(X[:32]), y[:32])
    assert steps[0]["loss"] == pytest.approx(float(task_loss.detach()), rel=1e-5)
    assert steps[0]["aux"]["load_balance"] == pytest.approx(float(before.load_balance_loss))
    # The epoch's term is the sample-weighted mean of its steps' terms.
    mean = sum(s["aux"]["load_balance"] for s in steps[:3]) / 3
    assert epochs[0]["train"]["aux"]["load_balance"] == pytest.approx(mean)
    # The log's lines read back with the term.
    replayed = event_from_json(next(line for line in lines if line["event"] == "step"))
    assert replayed.records[0].aux == steps[0]["aux"]


def test_a_net_without_the_term_logs_lines_as_before(runs_root):
    from nnx_lab import NNParams

    model = NNModel(NNParams(input_dim=6, output_dim=3, hidden_dims=[8]))
    run = model.train(_train(runs_root, n_epochs=1))
    lines = _lines(run)
    assert all("aux" not in line for line in lines if line["event"] == "step")
    assert all("aux" not in line["train"] for line in lines if line["event"] == "epoch_ended")


def _first_router_grads(root, model, batch_size=32, **kw):
    """The routers' gradients the optimizer sees at the first update (after unscaling)."""
    seen: list[list[torch.Tensor]] = []

    def hook(optimizer, args, kwargs):
        if not seen:
            seen.append([layer.router.weight.grad.clone() for layer in model.net.layers])

    X, y = _data(32)
    params = _train(root, n_epochs=1, n=32, **kw)
    params = params.replace(train_loader=DataLoader(TensorDataset(X, y), batch_size=batch_size))
    handle = register_optimizer_step_pre_hook(hook)
    try:
        run = model.train(params)
    finally:
        handle.remove()
    return seen[0], run


@pytest.mark.parametrize("mode", ["fp32", "fp16"])
def test_the_router_gradient_holds_the_weighted_term_at_the_loss_scale(tmp_path, mode, cpu_fp16):
    coef = 0.5
    precision = PrecisionPolicy("fp16") if mode == "fp16" else None
    with_term, without = _model(coef, precision), _model(0.0, precision)
    # The expected gradient of coef * term on the untrained net, in fp32 autograd.
    net = copy.deepcopy(with_term.net)
    net.train()
    X, _ = _data(32)
    net(X)
    term = net.auxiliary_loss()
    assert (term.name, term.weight) == ("load_balance", coef)
    expected = torch.autograd.grad(coef * term.value, [la.router.weight for la in net.layers])
    a, _ = _first_router_grads(tmp_path / "a", with_term)
    b, _ = _first_router_grads(tmp_path / "b", without)
    tol = {"rtol": 0.05, "atol": 2e-3} if mode == "fp16" else {"rtol": 1e-4, "atol": 1e-6}
    for got_a, got_b, want in zip(a, b, expected, strict=True):
        assert want.abs().max() > 1e-2  # the term moves the router: the check below can fail
        torch.testing.assert_close(got_a - got_b, want, **tol)


def test_accumulated_micro_batches_weigh_the_term_as_the_loss(tmp_path):
    coef = 0.5
    with_term, without = _model(coef), _model(0.0)
    net = copy.deepcopy(with_term.net)
    net.train()
    X, _ = _data(32)
    routers = [la.router.weight for la in net.layers]
    halves = []
    for part in (X[:16], X[16:]):  # two micro-batches of 16 rows: each weighs a half
        net(part)
        halves.append(torch.autograd.grad(coef * net.auxiliary_loss().value / 2, routers))
    a, run = _first_router_grads(tmp_path / "a", with_term, 16, accumulation_steps=2)
    b, _ = _first_router_grads(tmp_path / "b", without, 16, accumulation_steps=2)
    for i, (got_a, got_b) in enumerate(zip(a, b, strict=True)):
        want = halves[0][i] + halves[1][i]
        torch.testing.assert_close(got_a - got_b, want, rtol=1e-4, atol=1e-6)
    (step,) = [line for line in _lines(run) if line["event"] == "step"]
    assert step["aux"]["load_balance"] > 0
    X, y = _data(32)  # the logged loss is the window's task loss alone
    assert step["loss"] == pytest.approx(float(F.cross_entropy(net(X), y).detach()), rel=1e-5)


def test_a_zero_weight_is_reported_and_trains_as_a_run_without_the_term(tmp_path, monkeypatch):
    reported = _model(0.0)
    run = reported.train(_train(tmp_path / "a"))
    assert all("load_balance" in s["aux"] for s in _lines(run) if s["event"] == "step")
    monkeypatch.setattr(MoENN, "auxiliary_loss", lambda self: None)
    plain = _model(0.0)
    plain.train(_train(tmp_path / "b"))
    for (name, a), (_, b) in zip(
        reported.net.state_dict().items(), plain.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_mid_epoch_resume_continues_the_epochs_term(tmp_path):
    from nnx_lab import Callback

    class StopAt(Callback):
        def on_attach(self, control):
            self.control = control

        def on_step_ended(self, event):
            if event.step == 2:
                self.control.request_stop("test stop")

    full = _model().train(_train(tmp_path / "full", n_epochs=1))
    first = _model().train(_train(tmp_path / "cut", n_epochs=1), callbacks=[StopAt()])
    assert first.status.value == "stopped"
    resumed = _model().train(_train(tmp_path / "cut", n_epochs=1, resume_from_run_id=first.id))

    def epoch_term(run):
        (epoch,) = [line for line in _lines(run) if line["event"] == "epoch_ended"]
        return epoch["train"]["aux"]["load_balance"]

    assert epoch_term(resumed) == pytest.approx(epoch_term(full), rel=1e-6)


def test_an_own_module_may_hand_the_step_a_term_of_its_own(runs_root):
    from torch import nn

    from nnx_lab.engine.aux_loss import AuxTerm

    class Penalized(nn.Module):
        """A linear layer whose squared weights are a term of the training loss."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)
            self.term = None

        def forward(self, x):
            self.term = self.lin.weight.pow(2).sum() if self.training else None
            return self.lin(x)

        def auxiliary_loss(self):
            return None if self.term is None else AuxTerm("weight_norm", self.term, 0.0)

    module = Penalized()
    before = module.lin.weight.detach().pow(2).sum()
    model = NNModel(module=module, params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    run = model.train(_train(runs_root, n_epochs=1))
    (first, *_) = [line for line in _lines(run) if line["event"] == "step"]
    assert first["aux"]["weight_norm"] == pytest.approx(float(before))
