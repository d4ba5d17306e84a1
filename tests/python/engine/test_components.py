"""``components=[...]`` (§2.3): a component's state, and an objective's own, travel
with every checkpoint (tensors in safetensors, the rest in JSON), are restored on
resume, and are checked first with every problem in one ``ComponentRestoreError``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from step_factories import mlp_model, step_lines, tabular_params

from nnx_lab import (
    ComponentRestoreError,
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveResult,
)
from nnx_lab.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class WeightEMA:
    """A running average of the weights, updated by the objective after each update."""

    def __init__(self, name="ema", required=True):
        self.name, self.required = name, required
        self.ema: dict[str, torch.Tensor] = {}
        self.updates = 0

    def update(self, net):
        self.updates += 1
        for k, v in net.state_dict().items():
            held = self.ema.get(k)
            self.ema[k] = v.detach().clone() if held is None else 0.9 * held + 0.1 * v.detach()

    def component_spec(self):
        return ComponentSpec(self.name, 1, self.required)

    def component_state(self):
        return {"ema": dict(self.ema), "updates": self.updates}

    def load_component_state(self, state, version):
        assert version == 1
        self.ema = {k: v.clone() for k, v in state["ema"].items()}
        self.updates = int(state["updates"])


class Noisy(Objective):
    """Inputs jittered from the objective's own generator: its state must travel."""

    def __init__(self, ema):
        super().__init__()
        self.gen = torch.Generator().manual_seed(5)
        self.ema = ema

    def compute(self, net, batch, ctx):
        X, y = batch
        X = X + 0.1 * torch.randn(X.shape, generator=self.gen)
        out = net(X)
        return ObjectiveResult(
            [
                LossTerm("ce", F.cross_entropy(out, y, reduction="sum"), len(y)),
                LossTerm("l2", (out**2).sum(), out.numel(), weight=0.01),
            ]
        )

    def after_update(self, net, step):
        self.ema.update(net)

    def component_spec(self):
        return ComponentSpec("noise")

    def component_state(self):
        return {"generator": self.gen.get_state()}

    def load_component_state(self, state, version):
        self.gen.set_state(state["generator"])


def test_a_split_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path):
    ema_full = WeightEMA()
    full_model = mlp_model()
    full = full_model.train(
        tabular_params(tmp_path, 4), components=[ema_full], objective=Noisy(ema_full)
    )

    ema_a = WeightEMA()
    first = mlp_model().train(
        tabular_params(tmp_path, 2), components=[ema_a], objective=Noisy(ema_a)
    )
    ema_b = WeightEMA()
    objective_b = Noisy(ema_b)
    resumed_model = mlp_model()
    resumed = resumed_model.train(
        tabular_params(tmp_path, 2, resume_from_run_id=first.id),
        components=[ema_b],
        objective=objective_b,
    )
    assert set(resumed.resume_status["restored"]) >= {"ema", "noise"}
    assert step_lines(resumed) == step_lines(full)  # the parent's steps, then its own
    for name, weight in full_model.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[name]), name
    assert ema_b.updates == ema_full.updates == 16
    for name, value in ema_full.ema.items():
        assert torch.equal(value, ema_b.ema[name]), name
    # the checkpoint holds the EMA tensors in safetensors, the rest as JSON: no pickle
    files = {p.suffix for p in first.run_dir.rglob("*") if p.is_file()}
    assert ".safetensors" in files
    assert not files & {".pt", ".pkl", ".pickle"}


def test_every_component_problem_is_listed_at_once_before_any_run(tmp_path):
    ema = WeightEMA()
    first = mlp_model().train(tabular_params(tmp_path, 1), components=[ema], objective=Noisy(ema))
    before = sorted(p.name for p in tmp_path.iterdir())
    other = WeightEMA(name="other")
    with pytest.raises(ComponentRestoreError) as caught:
        mlp_model().train(
            tabular_params(tmp_path, 1, resume_from_run_id=first.id),
            components=[other],
            objective=Noisy(other),
        )
    problems = caught.value.problems
    assert len(problems) == 2
    assert any("'other' is required" in p for p in problems)
    assert any("'ema'" in p and "does not pass" in p for p in problems)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no run directory
    # an optional component starts fresh instead
    fresh = WeightEMA(name="other", required=False)
    with pytest.raises(ComponentRestoreError) as caught:
        mlp_model().train(
            tabular_params(tmp_path, 1, resume_from_run_id=first.id),
            components=[fresh],
            objective=Noisy(fresh),
        )
    assert len(caught.value.problems) == 1  # only the checkpoint's "ema" left over


def test_two_components_of_one_name_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="share the name"):
        mlp_model().train(tabular_params(tmp_path, 1), components=[WeightEMA(), WeightEMA()])


def test_a_mid_epoch_stop_resumes_the_epochs_term_sums(tmp_path):
    """Stopped between steps, the epoch's partial term sums travel with LAST: the
    resumed epoch's terms are the uninterrupted epoch's."""

    class StopAt:
        def on_attach(self, control):
            self.control = control

        def on_step_ended(self, event):
            if event.step == 6:  # epoch 2, its second update
                self.control.request_stop("test stop")

    ema_full = WeightEMA()
    full = mlp_model().train(
        tabular_params(tmp_path / "full", 2), components=[ema_full], objective=Noisy(ema_full)
    )
    ema_a = WeightEMA()
    first = mlp_model().train(
        tabular_params(tmp_path, 2),
        callbacks=[StopAt()],
        components=[ema_a],
        objective=Noisy(ema_a),
    )
    assert first.status.value == "stopped"
    ema_b = WeightEMA()
    resumed = mlp_model().train(
        tabular_params(tmp_path, 1, resume_from_run_id=first.id),
        components=[ema_b],
        objective=Noisy(ema_b),
    )
    assert resumed.resume_status["epoch_complete"] is False
    assert resumed.epochs[-1]["train"]["terms"] == full.epochs[-1]["train"]["terms"]
    assert step_lines(resumed) == step_lines(full)
