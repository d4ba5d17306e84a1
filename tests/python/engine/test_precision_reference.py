"""The seeded reference fixtures behind ``precision_support()``'s "verified" cells.

Each fixture trains the same seeded model twice from the same initial weights on the
same batches: once through ``NNModel.train`` under a policy, once in a plain float64
loop. The policy's per-step loss trajectory and final weights must stay within
``nnx_lab.precision.REFERENCE_TOLERANCES[(device, mode)]``. The CPU cells run here; the
CUDA cells are checked by ``scripts/cuda_precision_check.py`` on a CUDA host (CI has no
GPU, so ``precision_support()`` never reports a CUDA cell "verified").
"""

from __future__ import annotations

import copy

import pytest
import torch

import nnx_lab
from nnx_lab import (
    Devices,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.precision import REFERENCE_TOLERANCES

CPU_CELLS = [("cpu", "fp32"), ("cpu", "bf16")]
CUDA_CELLS = [("cuda", "fp32"), ("cuda", "fp16"), ("cuda", "bf16")]
OPTIMIZERS = {
    "adam": (NNOptimParams(max_lr=1e-2), lambda p: torch.optim.Adam(p, lr=1e-2)),
    "sgd": (
        NNOptimParams.builder().sgd(max_lr=0.1).build(),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    ),
}
EPOCHS = 5


# Bitwise comparisons between runs: one intra-op thread keeps reductions in one order.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _batches():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(128, 8, generator=g)
    y = (X @ w).argmax(1)
    return [(X[i : i + 32], y[i : i + 32]) for i in range(0, 128, 32)]


def _float64_reference(net, make_optimizer, batches, device):
    """The same updates in float64: per-step losses and final weights."""
    ref = copy.deepcopy(net).to(device=device, dtype=torch.float64).train()
    opt = make_optimizer(ref.parameters())
    losses = []
    for _ in range(EPOCHS):
        for X, y in batches:
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(ref(X.to(device, torch.float64)), y.to(device))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, ref.state_dict()


def _check_cell(tmp_path, device, mode, optimizer):
    tolerance = REFERENCE_TOLERANCES[(device, mode)]
    optim, make_optimizer = OPTIMIZERS[optimizer]
    batches = _batches()
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 16]),
        params=NNModelParams(device=Devices(device), precision=mode),
    )
    assert model.precision.effective == mode
    ref_losses, ref_weights = _float64_reference(model.net, make_optimizer, batches, device)
    run = model.train(
        NNTrainParams(
            n_epochs=EPOCHS, seed=0, train_loader=batches, optim=optim, runs_root=str(tmp_path)
        )
    )
    losses = [p.train_edp.loss for p in run.idps]
    assert len(losses) == len(ref_losses) == EPOCHS * len(batches)
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses, strict=True))
    assert worst_loss <= tolerance["loss_rtol"], (device, mode, worst_loss)
    worst_weight = max(
        (weight.double() - ref_weights[name]).abs().max().item()
        for name, weight in model.net.state_dict().items()
    )
    assert worst_weight <= tolerance["weight_atol"], (device, mode, worst_weight)
    assert losses[-1] < losses[0]  # it learned, so the comparison is not vacuous


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize(("device", "mode"), CPU_CELLS)
def test_cpu_cells_match_the_float64_reference(tmp_path, device, mode, optimizer):
    _check_cell(tmp_path, device, mode, optimizer)


def test_every_verified_cell_has_a_fixture_and_a_tolerance():
    table = nnx_lab.precision_support()
    verified = {(d, m) for d, row in table.items() for m, v in row.items() if v == "verified"}
    assert verified == set(CPU_CELLS)
    assert verified <= set(REFERENCE_TOLERANCES)
