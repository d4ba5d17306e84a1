"""What the Trainer took over from the engine's objective path (§3.2, issue 24):
gradient accumulation (exact, a short last window included, every optimizer once per
window), ``nonfinite="skip"``, a 4 = 2 + 2 resume with accumulation, the window in a
``trainer_step_fn``'s context, and the refusals before any run directory exists."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from trainer_factories import (
    ActorCritic,
    ac_model,
    ac_optims,
    gan_model,
    gan_step,
    mixture,
    optims,
    steps,
    trainer_params,
)

from nnx_lab import (
    EDP,
    LossTerm,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNTrainerParams,
    Objective,
    ObjectiveResult,
    Trainer,
)
from nnx_lab.errors import ConfigError, NonFiniteLossError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mean_terms(net, batch, ctx):
    """Two mean-reduced terms, one per optimizer's parameters."""
    X, y = batch
    actor = ((net.actor(X) - y) ** 2).sum()
    critic = ((net.critic(X) + y) ** 2).sum()
    return ObjectiveResult(
        [LossTerm("actor", actor, len(y)), LossTerm("critic", critic, len(y), weight=0.5)]
    )


def _one_term(net, batch, ctx):
    """One mean term over both players' parameters: the engine's eager path (each
    micro-batch's backward at once, the window's gradients divided afterwards)."""
    X, y = batch
    both = ((net.actor(X) - y) ** 2).sum() + 0.5 * ((net.critic(X) + y) ** 2).sum()
    return ObjectiveResult([LossTerm("both", both, len(y))])


def _rows(n=60):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(n, 2, generator=g)
    return X, X.sum(1, keepdim=True)


def _batches(size, n=60):
    X, y = _rows(n)
    return [(X[i : i + size], y[i : i + size]) for i in range(0, n, size)]


def _params(root, loader, **kw):
    kw.setdefault("optims", ac_optims())
    return NNTrainerParams(
        train_loader=loader, runs_root=str(root), progress=False, log_every=1, **kw
    )


@pytest.mark.parametrize("terms", [_mean_terms, _one_term])
def test_accumulating_two_batches_of_b_equals_one_batch_of_2b(tmp_path, terms):
    # 60 rows: windows of 12 + 12, 12 + 12 and a short last one of 12, against batches
    # of 24, 24 and 12
    small = ac_model()
    run = Trainer(small).train(
        _params(tmp_path / "a", _batches(12), n_epochs=2, accumulation_steps=2),
        objective=Objective(terms),
    )
    large = ac_model()
    Trainer(large).train(
        _params(tmp_path / "b", _batches(24), n_epochs=2), objective=Objective(terms)
    )
    # Bitwise on this CPU with one thread: a window sums its micro-batches' numerators
    # and gradients (12 + 12 rows) where the large batch reduces 24 rows at once, and
    # these sums happen to round alike; elsewhere a reduction split another way could
    # differ in the last bit (assert_close with rtol=1e-6 would then be the check).
    for name, weight in large.net.state_dict().items():
        assert torch.equal(small.net.state_dict()[name], weight), name
    records = steps(run)
    assert [s["step"] for s in records] == [2, 4, 6, 8, 10, 12]  # both optimizers per window
    assert [s["samples"] for s in records] == [24, 24, 12] * 2
    assert run.config["train"]["accumulation_steps"] == 2
    # each term is the window's exact mean: Σ numerator / Σ denominator
    X, y = _rows()
    torch.manual_seed(0)
    fresh = ActorCritic()
    first = terms(fresh, (X[:24], y[:24]), None).terms[0]
    assert records[0]["terms"][first.name] == pytest.approx(
        float(first.numerator.detach() / 24), rel=1e-6
    )


def test_accumulation_is_exact_against_a_hand_written_two_optimizer_loop(tmp_path):
    model = ac_model()
    Trainer(model).train(
        _params(tmp_path, _batches(12), accumulation_steps=2), objective=Objective(_mean_terms)
    )
    hand = ac_model().net
    actor = torch.optim.Adam(hand.actor.parameters(), lr=1e-2)
    critic = torch.optim.Adam(hand.critic.parameters(), lr=1e-3)
    data = _batches(12)
    for window in (data[0:2], data[2:4], data[4:5]):
        results = [_mean_terms(hand, b, None) for b in window]
        rows = sum(len(b[1]) for b in window)
        a = results[0].terms[0].numerator
        c = results[0].terms[1].numerator
        for r in results[1:]:
            a, c = a + r.terms[0].numerator, c + r.terms[1].numerator
        loss = a / rows + (c / rows) * 0.5
        actor.zero_grad(set_to_none=True)
        critic.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(hand.critic.parameters()), 0.5)
        actor.step()
        critic.step()
    for name, weight in hand.state_dict().items():
        assert torch.equal(weight, model.net.state_dict()[name]), name


def test_a_resume_with_accumulation_is_4_equal_2_plus_2_bit_for_bit(tmp_path):
    sched = {"critic": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    kw = {"accumulation_steps": 2, "schedulers": sched}
    whole = ac_model()
    full = Trainer(whole).train(
        _params(tmp_path / "a", _batches(12), n_epochs=4, **kw), objective=Objective(_mean_terms)
    )
    first = Trainer(ac_model()).train(
        _params(tmp_path / "b", _batches(12), n_epochs=2, **kw), objective=Objective(_mean_terms)
    )
    resumed = ac_model()
    trainer = Trainer(resumed)
    second = trainer.train(
        _params(tmp_path / "b", _batches(12), n_epochs=2, resume_from_run_id=first.id, **kw),
        objective=Objective(_mean_terms),
    )
    for name, weight in whole.net.state_dict().items():
        assert torch.equal(weight, resumed.net.state_dict()[name]), name
    tail = [(s["step"], s["loss"], s["terms"], s["lrs"]) for s in steps(full)][6:]
    assert [(s["step"], s["loss"], s["terms"], s["lrs"]) for s in steps(second)][-6:] == tail
    assert tail[-1][3] == {"actor": 1e-2, "critic": 1e-3 / 8}  # halved after epochs 1-3
    assert trainer.last_step.updates == {"actor": 12, "critic": 12}  # 3 windows x 4 epochs


class _NaNOn(Objective):
    """``_mean_terms``, with a NaN total on one batch (by its first row)."""

    def __init__(self, marker, **kw):
        super().__init__(**kw)
        self.marker = marker
        self.steps = []

    def compute(self, net, batch, ctx):
        result = _mean_terms(net, batch, ctx)
        if torch.equal(batch[0][0], self.marker):
            term = result.terms[0]
            nan = LossTerm("actor", term.numerator * float("nan"), term.denominator)
            result = ObjectiveResult([nan, result.terms[1]])
        return result

    def after_update(self, net, step):
        self.steps.append(step)


def test_nonfinite_skip_skips_every_optimizers_step_counts_and_goes_on(tmp_path):
    data = _batches(12)
    objective = _NaNOn(data[2][0][0], nonfinite="skip")
    skipped = ac_model()
    run = Trainer(skipped).train(_params(tmp_path / "a", data), objective=objective)
    without = ac_model()
    Trainer(without).train(
        _params(tmp_path / "b", data[:2] + data[3:]), objective=Objective(_mean_terms)
    )
    # no optimizer stepped on the skipped batch: the run is the one without it
    for name, weight in without.net.state_dict().items():
        assert torch.equal(weight, skipped.net.state_dict()[name]), name
    assert [s["step"] for s in steps(run)] == [2, 4, 6, 8]
    assert objective.steps == [1, 2, 3, 4]  # the skipped update took no number
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    epoch = next(x for x in lines if x["event"] == "epoch_ended")
    assert epoch["train"]["skipped_updates"] == 1
    assert run.config["objective"]["nonfinite"] == "skip"
    # "fail" (the default) stops before the update, naming the step
    stopped = ac_model()
    before = {k: v.clone() for k, v in stopped.net.state_dict().items()}
    with pytest.raises(NonFiniteLossError, match="at step 1"):
        Trainer(stopped).train(_params(tmp_path / "c", data[2:]), objective=_NaNOn(data[2][0][0]))
    assert all(torch.equal(before[k], v) for k, v in stopped.net.state_dict().items())
    (failed,) = [p for p in (tmp_path / "c").iterdir() if not p.name.startswith(".")]
    (line,) = [json.loads(x) for x in (failed / "metrics.jsonl").read_text().splitlines()][1:2]
    assert (line["step"], line["lr"], line["lrs"]) == (1, None, {"actor": 1e-2, "critic": 1e-3})
    assert line["loss"] != line["loss"]  # NaN: the step that diverged, logged


def test_a_trainer_step_fn_sees_its_window_and_can_accumulate(runs_root):
    seen = []

    def accumulate_d(ctx):
        """D accumulates over the window and steps at its end; G steps every batch."""
        seen.append((ctx.batch_idx, ctx.micro_batch, ctx.window_size, ctx.accumulate_grad_batches))
        real, _ = ctx.batch
        n = len(real)
        fake = ctx.model.G(torch.zeros(n, 2))
        d = F.binary_cross_entropy_with_logits(ctx.model.D(real), torch.ones(n, 1))
        d = d + F.binary_cross_entropy_with_logits(ctx.model.D(fake.detach()), torch.zeros(n, 1))
        if ctx.micro_batch == 0:
            ctx.optimizers["D"].zero_grad(set_to_none=True)
        (d / ctx.window_size).backward()  # equal micro-batches: the window's mean
        if ctx.micro_batch == ctx.window_size - 1:
            ctx.optimizers["D"].step()
            ctx.report_update("D")
        return EDP(loss=float(d.detach()), samples=n)

    data = mixture(n=60)  # five batches of 12: windows of 2, 2 and 1
    model = gan_model()
    g_before = {k: v.clone() for k, v in model.net.state_dict().items() if k.startswith("G.")}
    run = Trainer(model).train(
        NNTrainerParams(
            optims=optims(),
            train_loader=data,
            runs_root=str(runs_root),
            progress=False,
            log_every=1,
            accumulation_steps=2,
        ),
        trainer_step_fn=accumulate_d,
    )
    assert seen == [(0, 0, 2, 2), (1, 1, 2, 2), (2, 0, 2, 2), (3, 1, 2, 2), (4, 0, 1, 2)]
    assert [s["step"] for s in steps(run)] == [1, 2, 3]  # D's three window updates
    # the same D updates as batches of 24, 24 and 12 stepped at once
    X = torch.cat([x for x, _ in data])
    union = [(X[i : i + 24], None) for i in range(0, 60, 24)]
    hand = gan_model().net
    d_opt = torch.optim.Adam(hand.D.parameters(), lr=2e-3)
    for real, _ in union:
        n = len(real)
        fake = hand.G(torch.zeros(n, 2))
        d = F.binary_cross_entropy_with_logits(hand.D(real), torch.ones(n, 1))
        d = d + F.binary_cross_entropy_with_logits(hand.D(fake.detach()), torch.zeros(n, 1))
        d_opt.zero_grad(set_to_none=True)
        d.backward()
        d_opt.step()
    # means of two 12-row means against one 24-row mean: equal up to rounding
    for name, weight in hand.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], weight, rtol=1e-6, atol=1e-7)
    assert all(torch.equal(v, model.net.state_dict()[k]) for k, v in g_before.items())


def test_nnx_accumulate_grad_batches_on_the_optimizers_is_taken_when_they_agree(runs_root):
    params = _params(runs_root, _batches(12), optims=ac_optims(accumulate_grad_batches=3))
    assert params.train_params().accumulation_steps == 3
    with pytest.raises(ConfigError, match="same accumulate_grad_batches"):
        NNTrainerParams(
            optims={
                "actor": NNOptimParams(
                    param_groups=[NNParamGroupSpec("actor.*")], accumulate_grad_batches=2
                ),
                "critic": NNOptimParams(
                    param_groups=[NNParamGroupSpec("critic.*")], accumulate_grad_batches=3
                ),
            }
        )
    with pytest.raises(ConfigError, match=r"NNTrainParams\.accumulation_steps"):
        _params(
            runs_root,
            _batches(12),
            optims=ac_optims(accumulate_grad_batches=3),
            accumulation_steps=2,
        )
    with pytest.raises(ConfigError, match=r"NNTrainParams\.accumulation_steps"):
        _params(runs_root, _batches(12), accumulation_steps=0)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_trainer_step_fn_under_distributed_is_refused_with_the_reason(runs_root):
    with pytest.raises(ConfigError, match="cannot apply the data-parallel gradient all-reduce"):
        Trainer(gan_model()).train(
            trainer_params(runs_root), trainer_step_fn=gan_step, distributed=object()
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_the_trainer_fields_are_nntrainparams_own(runs_root):
    """Derived, not repeated: every NNTrainParams field but the one optimizer, the one
    schedule and extra_metrics, with its default, and refused alike."""
    import dataclasses

    from nnx_lab import NNTrainParams

    mine = {f.name: f for f in dataclasses.fields(NNTrainerParams) if f.init}
    theirs = {f.name: f for f in dataclasses.fields(NNTrainParams)}
    assert set(theirs) - set(mine) == {"optim", "scheduler", "extra_metrics"}
    assert set(mine) - set(theirs) == {"optims", "schedulers"}
    for name in set(mine) & set(theirs):
        assert mine[name].default == theirs[name].default, name
    with pytest.raises(ConfigError, match=r"NNTrainParams\.log_every"):
        NNTrainerParams(optims=ac_optims(), log_every=0)


def test_a_mid_epoch_stop_with_accumulation_resumes_bit_for_bit(tmp_path):
    """A Stop after a window in the middle of an epoch writes LAST there; the resume
    replays the epoch's order, skips the windows trained and goes on as if never
    stopped: every optimizer, the terms and the counts included."""

    class StopAt:
        def on_attach(self, control):
            self.control = control

        def on_step_ended(self, event):
            if event.step == 8:  # epoch 2's first window (6 steps per epoch)
                self.control.request_stop("test stop")

    kw = {"accumulation_steps": 2}
    whole = ac_model()
    full = Trainer(whole).train(
        _params(tmp_path / "a", _batches(12), n_epochs=2, **kw), objective=Objective(_mean_terms)
    )
    first = Trainer(ac_model()).train(
        _params(tmp_path / "b", _batches(12), n_epochs=2, **kw),
        objective=Objective(_mean_terms),
        callbacks=[StopAt()],
    )
    assert first.status.value == "stopped"
    resumed = ac_model()
    trainer = Trainer(resumed)
    second = trainer.train(
        _params(tmp_path / "b", _batches(12), n_epochs=1, resume_from_run_id=first.id, **kw),
        objective=Objective(_mean_terms),
    )
    assert second.resume_status["epoch_complete"] is False
    for name, weight in whole.net.state_dict().items():
        assert torch.equal(weight, resumed.net.state_dict()[name]), name
    assert [(s["step"], s["terms"]) for s in steps(full)] == [
        (s["step"], s["terms"]) for s in steps(second)
    ]
    assert trainer.last_step.updates == {"actor": 6, "critic": 6}


def test_a_health_probe_tags_an_objectives_tensors_with_their_optimizer(tmp_path):
    from nnx_lab import HealthProbe

    probe = HealthProbe(every=2)
    Trainer(ac_model()).train(
        _params(tmp_path, _batches(12), accumulation_steps=2),
        objective=Objective(_mean_terms),
        callbacks=[probe],
    )
    record = probe.records[0]
    assert record.optimizers == [n.split(".")[0] for n in record.names]
    assert set(record.optimizers) == {"actor", "critic"}
