"""The multi-optimizer Trainer (§3.2): a small GAN on a 2-D mixture of Gaussians, each
optimizer on the parameters it owns, named schedulers, every optimizer in the run id and
the checkpoints (a 2 + 2 = 4 warm resume, bit for bit), ``lrs`` in the log, and the
refusals before any run directory exists."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from trainer_factories import (
    GAN,
    ac_model,
    ac_optims,
    ac_two_terms,
    gan_model,
    gan_step,
    mixture,
    optims,
    steps,
    trainer_params,
)

from nnx_lab import (
    EDP,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNRun,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    Objective,
    Trainer,
)
from nnx_lab.errors import ComponentRestoreError, ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _empty(root):
    return not root.exists() or not any(root.iterdir())


def test_each_optimizer_trains_only_the_parameters_it_owns(runs_root):
    model = gan_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    trainer = Trainer(model)

    # D alone steps: G's parameters must stay as they were
    def d_only(ctx):
        real, _ = ctx.batch
        fake = ctx.model.G(torch.randn(len(real), 2))
        loss = F.binary_cross_entropy_with_logits(ctx.model.D(fake), torch.ones(len(real), 1))
        ctx.update("D", loss)
        return EDP(loss=float(loss.detach()), samples=len(real))

    run = trainer.train(trainer_params(runs_root, n_epochs=1), trainer_step_fn=d_only)
    after = model.net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("G."))
    assert all(not torch.equal(before[k], after[k]) for k in before if k.startswith("D."))
    assert [s["step"] for s in steps(run)] == [1, 2, 3, 4]
    owned = {
        k: [p for g in o.param_groups for p in g["params"]]
        for k, o in trainer.last_step.optimizers.items()
    }
    assert {id(p) for p in owned["G"]} == {id(p) for p in model.net.G.parameters()}


def test_a_gan_run_logs_every_optimizers_rate_and_counts_every_update(runs_root):
    model = gan_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    run = Trainer(model).train(trainer_params(runs_root), trainer_step_fn=gan_step)
    records = steps(run)
    assert [s["step"] for s in records] == [2, 4, 6, 8, 10, 12, 14, 16]  # D and G per batch
    assert all(s["lrs"] == {"G": 1e-3, "D": 2e-3} for s in records)
    after = model.net.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k in before)
    config = run.config["train_step"]["config"]
    assert config["optims"]["D"]["max_lr"] == 2e-3
    assert config["step"]["name"].endswith("gan_step")


def test_every_optimizer_enters_the_run_id(runs_root):
    a = Trainer(gan_model()).train(trainer_params(runs_root, n_epochs=1), trainer_step_fn=gan_step)
    b = Trainer(gan_model()).train(
        trainer_params(runs_root, n_epochs=1, optims=optims(d_lr=3e-3)), trainer_step_fn=gan_step
    )
    c = Trainer(gan_model()).train(
        trainer_params(runs_root / "c", n_epochs=1), trainer_step_fn=gan_step
    )
    assert a.id != b.id
    assert a.id == c.id


def test_a_named_scheduler_lowers_only_its_optimizers_rate(runs_root):
    # threshold=1.0 (relative): no epoch counts as an improvement, so with patience 0
    # the end of every epoch halves G's rate
    sched = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    run = Trainer(gan_model()).train(
        trainer_params(runs_root, n_epochs=3, schedulers=sched), trainer_step_fn=gan_step
    )
    by_epoch = {s["epoch"]: s["lrs"] for s in steps(run)}
    assert by_epoch[1] == {"G": 1e-3, "D": 2e-3}
    assert by_epoch[2] == {"G": 5e-4, "D": 2e-3}
    assert by_epoch[3] == {"G": 2.5e-4, "D": 2e-3}


def test_a_warm_resume_2_plus_2_equals_4_bit_for_bit(tmp_path):
    sched = {"D": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    whole = gan_model()
    full = Trainer(whole).train(
        trainer_params(tmp_path / "a", n_epochs=4, schedulers=sched), trainer_step_fn=gan_step
    )
    half = gan_model()
    first = Trainer(half).train(
        trainer_params(tmp_path / "b", n_epochs=2, schedulers=sched), trainer_step_fn=gan_step
    )
    resumed_model = gan_model()
    second = Trainer(resumed_model).train(
        trainer_params(tmp_path / "b", n_epochs=2, schedulers=sched, resume_from_run_id=first.id),
        trainer_step_fn=gan_step,
    )
    for name, weight in whole.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[name]), name
    tail = [(s["step"], s["loss"], s["lrs"]) for s in steps(full)][8:]
    assert [(s["step"], s["loss"], s["lrs"]) for s in steps(second)][-8:] == tail


@pytest.mark.parametrize("call", ["train", "check"])  # check: a race's, before any run
def test_a_stateful_resume_with_other_optimizer_settings_is_refused(tmp_path, call):
    first = Trainer(gan_model()).train(
        trainer_params(tmp_path, n_epochs=1), trainer_step_fn=gan_step
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    params = trainer_params(
        tmp_path, n_epochs=1, optims=optims(d_lr=5e-3), resume_from_run_id=first.id
    )
    with pytest.raises(ComponentRestoreError, match="optims"):
        getattr(Trainer(gan_model()), call)(params, trainer_step_fn=gan_step)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_overlap_is_refused_naming_the_parameter_and_both_optimizers(runs_root):
    with pytest.raises(ConfigError, match=r"'G\.0\.weight' is selected by both optimizer 'G'"):
        Trainer(gan_model()).train(
            trainer_params(runs_root, optims=optims(d_glob="*")), trainer_step_fn=gan_step
        )
    assert _empty(runs_root)


def test_a_trainable_parameter_no_optimizer_owns_is_refused_unless_frozen(runs_root):
    with pytest.raises(ConfigError, match=r"no optimizer owns \(first: 'D\.2\.weight'\)"):
        Trainer(gan_model()).train(
            trainer_params(runs_root, optims=optims(d_glob="D.0.*")), trainer_step_fn=gan_step
        )
    assert _empty(runs_root)
    model = gan_model()
    model.freeze("D.2.*")
    frozen = model.net.D[2].weight.clone()
    Trainer(model).train(
        trainer_params(runs_root, optims=optims(d_glob="D.0.*")), trainer_step_fn=gan_step
    )
    assert torch.equal(model.net.D[2].weight, frozen)


def test_bad_trainer_params_are_refused_before_any_run(runs_root):
    with pytest.raises(ConfigError, match=r"NNTrainerParams\.optims"):
        NNTrainerParams(optims={})
    with pytest.raises(ConfigError, match=r"optims\['G'\].param_groups"):
        NNTrainerParams(optims={"G": NNOptimParams()})
    with pytest.raises(ConfigError, match="named after an optimizer"):
        NNTrainerParams(optims=optims(), schedulers={"H": NNSchedulerParams()})
    with pytest.raises(ConfigError, match=r"optims\['D'\].param_groups\[0\]"):
        Trainer(gan_model()).train(
            trainer_params(runs_root, optims=optims(d_glob="disc.*")), trainer_step_fn=gan_step
        )
    torch.manual_seed(0)
    bf16 = NNModel(
        module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, precision="bf16")
    )
    with pytest.raises(ConfigError, match=r"Trainer\(optims G, D\) is marked full_precision_only"):
        Trainer(bf16).train(trainer_params(runs_root), trainer_step_fn=gan_step)
    with pytest.raises(ConfigError, match=r"pass an nnx_lab\.Objective"):
        Trainer(gan_model()).train(trainer_params(runs_root), objective=object())
    with pytest.raises(ConfigError, match="trainer_step_fn= or objective="):
        Trainer(gan_model()).train(
            trainer_params(runs_root), trainer_step_fn=gan_step, train_step_fn=gan_step
        )
    assert _empty(runs_root)


def test_the_event_stream_carries_each_optimizers_rate(runs_root):
    class Sink:
        def __init__(self):
            self.records = []

        def on_step_metrics(self, event):
            self.records.extend(event.records)

    sink = Sink()
    Trainer(gan_model()).train(
        trainer_params(runs_root, n_epochs=1), trainer_step_fn=gan_step, callbacks=[sink]
    )
    assert [r.step for r in sink.records] == [2, 4, 6, 8]
    assert all(r.lrs == {"G": 1e-3, "D": 2e-3} for r in sink.records)


def test_a_weights_only_resume_starts_fresh_optimizers_with_new_settings(tmp_path):
    first = Trainer(gan_model()).train(
        trainer_params(tmp_path, n_epochs=1), trainer_step_fn=gan_step
    )
    trainer = Trainer(gan_model())
    params = trainer_params(
        tmp_path,
        n_epochs=1,
        optims=optims(d_lr=5e-3),
        resume_from_run_id=first.id,
        resume_mode="weights_only",
    )
    run = trainer.train(params, trainer_step_fn=gan_step)
    new = [s for s in steps(run) if s["step"] > 8]  # the log carries the source's steps first
    assert [s["step"] for s in new] == [10, 12, 14, 16]
    assert all(s["lrs"] == {"G": 1e-3, "D": 5e-3} for s in new)
    assert trainer.last_step.updates == {"G": 4, "D": 4}  # counted afresh


def test_reporting_an_unknown_optimizer_names_the_ones_there_are(runs_root):
    def wrong(ctx):
        ctx.report_update("Gen")
        return EDP(loss=0.0, samples=1)

    with pytest.raises(ValueError, match=r"report_update\('Gen'\): no such optimizer; .*'G', 'D'"):
        Trainer(gan_model()).train(trainer_params(runs_root), trainer_step_fn=wrong)
    with pytest.raises(ConfigError, match="pass an NNModel"):
        Trainer(object())
    with pytest.raises(ConfigError, match="pass an NNTrainerParams"):
        Trainer(gan_model()).train(object(), trainer_step_fn=gan_step)


def test_an_objective_steps_every_optimizer_as_a_hand_written_loop_does(runs_root):
    data = mixture()
    model = ac_model()
    params = NNTrainerParams(
        optims=ac_optims(),
        train_loader=data,
        runs_root=str(runs_root),
        progress=False,
        log_every=1,
    )
    run = Trainer(model).train(params, objective=Objective(ac_two_terms))
    hand = ac_model().net
    actor = torch.optim.Adam(hand.actor.parameters(), lr=1e-2)
    critic = torch.optim.Adam(hand.critic.parameters(), lr=1e-3)
    for X, y in data:
        result = ac_two_terms(hand, (X, y), None)
        a, c = result.terms
        loss = a.numerator / a.denominator + c.numerator * 0.1
        actor.zero_grad(set_to_none=True)
        critic.zero_grad(set_to_none=True)
        loss.backward()
        actor.step()
        torch.nn.utils.clip_grad_norm_(list(hand.critic.parameters()), 0.5)
        critic.step()
    for name, weight in hand.state_dict().items():
        assert torch.equal(weight, model.net.state_dict()[name]), name
    records = steps(run)
    assert [s["step"] for s in records] == [2, 4, 6, 8]  # both optimizers per batch
    assert set(records[0]["terms"]) == {"actor", "critic"}
    assert records[0]["lrs"] == {"actor": 1e-2, "critic": 1e-3}
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    epoch = next(x for x in lines if x["event"] == "epoch_ended")
    assert set(epoch["train"]["terms"]) == {"actor", "critic"}
    assert "ac_two_terms" in json.dumps(run.config["objective"]["code"])
    assert run.config["objective"]["config"]["trainer"]["optims"]["critic"]["max_lr"] == 1e-3
    with pytest.raises(ConfigError, match="exactly one of"):
        Trainer(model).train(params, objective=Objective(ac_two_terms), trainer_step_fn=gan_step)


def test_an_objective_trains_under_bf16_as_a_hand_written_autocast_loop_does(runs_root):
    data = mixture()

    def model():
        return ac_model(precision="bf16")

    trained = model()
    params = NNTrainerParams(
        optims=ac_optims(), train_loader=data, runs_root=str(runs_root), progress=False
    )
    run = Trainer(trained).train(params, objective=Objective(ac_two_terms))
    assert run.config["model"]["precision"]["mode"] == "bf16"
    hand = model().net
    actor = torch.optim.Adam(hand.actor.parameters(), lr=1e-2)
    critic = torch.optim.Adam(hand.critic.parameters(), lr=1e-3)
    for X, y in data:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a, c = ac_two_terms(hand, (X, y), None).terms
        loss = a.numerator / a.denominator + c.numerator * 0.1
        actor.zero_grad(set_to_none=True)
        critic.zero_grad(set_to_none=True)
        loss.backward()
        actor.step()
        torch.nn.utils.clip_grad_norm_(list(hand.critic.parameters()), 0.5)
        critic.step()
    for name, weight in hand.state_dict().items():
        assert weight.dtype == torch.float32  # fp32 parameters, bf16 forward
        assert torch.equal(weight, trained.net.state_dict()[name]), name
    # without autocast the same loop ends elsewhere: the policy was applied
    plain = model().net
    opt = torch.optim.Adam(plain.actor.parameters(), lr=1e-2)
    X, y = next(iter(data))
    a, _ = ac_two_terms(plain, (X, y), None).terms
    opt.zero_grad()
    (a.numerator / a.denominator).backward()
    opt.step()
    assert not torch.equal(plain.actor.weight, hand.actor.weight)
    # a step function still refuses a reduced policy
    with pytest.raises(ConfigError, match="full_precision_only"):
        Trainer(model()).train(params, trainer_step_fn=gan_step)


def test_the_log_has_no_single_lr_for_several_optimizers(runs_root):
    """The engine's own optimizer is never stepped by a Trainer: its rate would mislead,
    so the log's ``lr`` is null and ``lrs`` holds every optimizer's, in step lines, the
    epoch line, the run's records and the log's strict reader."""
    from nnx_lab.runs import LogLineError, event_from_line

    sched = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    run = Trainer(gan_model()).train(
        trainer_params(runs_root, schedulers=sched), trainer_step_fn=gan_step
    )
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    step_lines = [x for x in lines if x["event"] == "step"]
    assert all(x["lr"] is None for x in step_lines)
    assert step_lines[-1]["lrs"] == {"G": 5e-4, "D": 2e-3}  # G's halved after epoch 1
    assert [x["lr"] for x in lines if x["event"] == "epoch_ended"] == [None, None]
    loaded = NNRun.load(run.id, runs_root=runs_root)
    assert {p.lr for p in loaded.idps} == {None}
    line = dict(step_lines[0])
    assert event_from_line(json.dumps(line).encode()).records[0].lrs == line["lrs"]
    del line["lrs"]
    with pytest.raises(LogLineError, match="lr is null without lrs"):
        event_from_line(json.dumps(line).encode())
    # one optimizer keeps its one rate
    plain = gan_model().train(
        NNTrainParams(train_loader=mixture(), runs_root=str(runs_root), progress=False)
    )
    assert {p.lr for p in plain.idps} == {1e-3}
