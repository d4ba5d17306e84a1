"""Fine-tuning (§3.1): parameter-group rules, freezing by glob, and their place in the
run id, the optimizer, checkpoints and resume."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch

from nnx_lab import (
    ConfigError,
    NNCheckpoint,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    ResumeError,
    freeze,
    frozen,
    unfreeze,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# The MLP's parameters: layers.0.*, layers.3.*, layers.6.* (weight and bias each).
RULES = (
    NNParamGroupSpec("layers.0.bias", lr_multiplier=0.1, weight_decay=0.0),
    NNParamGroupSpec("layers.0.*", lr=1e-4),
    NNParamGroupSpec("*.bias", weight_decay=0.0),
)


def _optim(*rules, **kw):
    base = {"max_lr": 1e-2, "weight_decay": 5e-5, "grad_clip_norm": 1.0}
    return NNOptimParams(**{**base, **kw}, param_groups=rules)


def _groups(run):
    state = NNCheckpoint.load_training_state(run)
    return state.optimizer["param_groups"], state.optimizer["state"]


# -- NNParamGroupSpec and NNOptimParams ----------------------------------------------------
def test_a_rule_takes_lr_or_lr_multiplier_not_both():
    with pytest.raises(ConfigError, match="not both"):
        NNParamGroupSpec("encoder.*", lr=1e-3, lr_multiplier=0.1)
    with pytest.raises(ConfigError, match=r"NNParamGroupSpec\.lr_multiplier"):
        NNParamGroupSpec("encoder.*", lr_multiplier=0.0)
    with pytest.raises(ConfigError, match="name_pattern"):
        NNParamGroupSpec("")


def test_param_groups_round_trip_through_json_and_enter_the_optimizer_json():
    optim = _optim(*RULES)
    data = optim.to_json()
    assert data["param_groups"][1] == {
        "name_pattern": "layers.0.*",
        "lr": 1e-4,
        "lr_multiplier": None,
        "weight_decay": None,
    }
    assert NNOptimParams.from_json(data) == optim
    assert NNOptimParams.from_state(optim.state()) == optim
    assert "param_groups" not in NNOptimParams().to_json()  # old run ids unchanged
    with pytest.raises(ConfigError, match="unknown: lr_mult"):
        NNOptimParams(param_groups=[{"name_pattern": "*", "lr_mult": 2}])


def test_the_builder_takes_param_groups():
    built = NNOptimParams.builder().adamw(max_lr=1e-3).param_groups(*RULES).build()
    assert built.param_groups == RULES


# -- the optimizer's groups ----------------------------------------------------------------
def test_first_match_wins_and_unmatched_parameters_take_the_defaults(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=1, optim=_optim(*RULES)))
    groups, _ = _groups(run)
    # default group first (layers.3.weight, layers.6.weight), then the rules in order
    got = [(len(g["params"]), g["lr"], g["weight_decay"]) for g in groups]
    assert got == [(2, 1e-2, 5e-5), (1, 1e-3, 0.0), (1, 1e-4, 5e-5), (2, 1e-2, 0.0)]


def test_a_rule_that_matches_nothing_is_refused_before_any_run(runs_root):
    params = f.train_params(runs_root, n_epochs=1, optim=_optim(NNParamGroupSpec("encoder.*")))
    with pytest.raises(ConfigError, match=r"param_groups\[0\].*matches no parameter") as err:
        f.model().train(params)
    assert "layers.0.weight" in str(err.value)  # the near names
    assert "docs/nnx_differences.md" in str(err.value)  # a difference kept on purpose
    assert not runs_root.exists()


def test_a_rule_shadowed_by_an_earlier_one_is_refused(runs_root):
    optim = _optim(NNParamGroupSpec("*"), NNParamGroupSpec("*.bias", weight_decay=0.0))
    with pytest.raises(ConfigError, match=r"taken by the earlier rule param_groups\[0\]"):
        f.model().train(f.train_params(runs_root, n_epochs=1, optim=optim))
    assert not runs_root.exists()


def test_a_rule_that_matches_only_frozen_parameters_is_refused(runs_root):
    model = f.model()
    model.freeze("layers.0.*")
    optim = _optim(NNParamGroupSpec("layers.0.*", lr=1e-4))
    with pytest.raises(ConfigError, match="matches only frozen parameters"):
        model.train(f.train_params(runs_root, n_epochs=1, optim=optim))
    assert not runs_root.exists()


def test_the_param_groups_enter_the_run_id(runs_root):
    model = f.model()
    plain = model.expected_run_id(f.train_params(runs_root, optim=_optim()))
    ruled = model.expected_run_id(f.train_params(runs_root, optim=_optim(*RULES)))
    reordered = model.expected_run_id(f.train_params(runs_root, optim=_optim(*RULES[::-1][:2])))
    assert len({plain, ruled, reordered}) == 3
    assert ruled == f.model().expected_run_id(f.train_params(runs_root, optim=_optim(*RULES)))


def test_the_plateau_scheduler_scales_every_group_by_its_own_rate(runs_root):
    sched = NNSchedulerParams(factor=0.5, patience=0, threshold=10.0)  # never "improves"
    run = f.model().train(
        f.train_params(runs_root, n_epochs=3, optim=_optim(*RULES), scheduler=sched)
    )
    groups, _ = _groups(run)
    lrs = [g["lr"] for g in groups]
    first = lrs[0] / 1e-2  # the cut the scheduler applied so far
    assert first < 1.0
    assert lrs == pytest.approx([1e-2 * first, 1e-3 * first, 1e-4 * first, 1e-2 * first])


def test_a_split_run_with_param_groups_resumes_bit_for_bit(runs_root):
    optim = _optim(*RULES)
    full_model = f.model()
    full = full_model.train(f.train_params(runs_root, n_epochs=4, optim=optim))
    first = f.model().train(f.train_params(runs_root, n_epochs=2, optim=optim))
    resumed_model = f.model()
    resumed = resumed_model.train(
        f.train_params(runs_root, n_epochs=2, optim=optim, resume_from_run_id=first.id)
    )
    for a, b in zip(
        full_model.net.state_dict().values(),
        resumed_model.net.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(a, b)
    (g_full, s_full), (g_res, s_res) = _groups(full), _groups(resumed)
    assert [g["lr"] for g in g_full] == [g["lr"] for g in g_res]
    assert len(g_full) == 4
    for key in s_full:
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(s_full[key][name], s_res[key][name])


def test_a_resume_with_other_rules_is_refused(runs_root):
    first = f.model().train(f.train_params(runs_root, n_epochs=1, optim=_optim(*RULES)))
    other = _optim(NNParamGroupSpec("layers.0.*", lr=1e-4))
    with pytest.raises(ResumeError, match="optimizer topology mismatch"):
        f.model().train(
            f.train_params(runs_root, n_epochs=1, optim=other, resume_from_run_id=first.id)
        )
    same_shape = _optim(RULES[0], NNParamGroupSpec("layers.0.*", lr=2e-4), RULES[2])
    with pytest.raises(ResumeError, match=r"optimizer settings mismatch.*param_groups"):
        f.model().train(
            f.train_params(runs_root, n_epochs=1, optim=same_shape, resume_from_run_id=first.id)
        )
    fresh = f.model().train(
        f.train_params(
            runs_root,
            n_epochs=1,
            optim=other,
            resume_from_run_id=first.id,
            resume_mode="weights_only",
        )
    )
    assert fresh.status.value == "finished"


# -- freezing -----------------------------------------------------------------------------
def test_freeze_and_unfreeze_by_glob_count_and_list_what_they_touched():
    model = f.model()
    assert model.freeze("layers.0.*", "*.6.bias") == 3
    assert frozen(model.net) == ("layers.0.weight", "layers.0.bias", "layers.6.bias")
    assert model.unfreeze("layers.0.bias") == 1
    assert frozen(model) == ("layers.0.weight", "layers.6.bias")
    assert freeze(model.net) == 6  # no pattern: every parameter
    assert unfreeze(model.net) == 6
    assert frozen(model.net) == ()


def test_a_freeze_pattern_that_matches_nothing_is_refused_with_near_names():
    model = f.model()
    with pytest.raises(ConfigError, match="matches no parameter") as err:
        model.freeze("layers.0.*", "layer.3.*")
    assert "layers.3" in str(err.value)
    assert frozen(model.net) == ()  # nothing changed, not even the good pattern's


def test_the_frozen_set_enters_the_run_id(runs_root):
    params = f.train_params(runs_root, n_epochs=1)
    plain = f.model().expected_run_id(params)
    a, b, c = f.model(), f.model(), f.model()
    a.freeze("layers.0.*")
    b.freeze("layers.0.*")
    c.freeze("layers.3.*")
    assert a.expected_run_id(params) == b.expected_run_id(params)
    assert len({plain, a.expected_run_id(params), c.expected_run_id(params)}) == 3
    run = a.train(params)
    assert run.config["frozen"] == ["layers.0.weight", "layers.0.bias"]
    assert "frozen" not in f.model().run_config(params)


def test_a_frozen_parameter_gets_no_optimizer_state_and_does_not_change(runs_root):
    model = f.model()
    model.freeze("layers.0.*")
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    run = model.train(f.train_params(runs_root, n_epochs=2, optim=_optim(*RULES[2:])))
    after = model.net.state_dict()
    assert torch.equal(after["layers.0.weight"], before["layers.0.weight"])
    assert torch.equal(after["layers.0.bias"], before["layers.0.bias"])
    assert not torch.equal(after["layers.3.weight"], before["layers.3.weight"])
    groups, state = _groups(run)
    held = sorted(i for g in groups for i in g["params"])
    assert len(held) == 4
    assert len(state) == 4


def test_a_drift_report_of_two_runs_names_the_frozen_set_as_changing_the_id(runs_root):
    from nnx_lab import drift_report

    plain = f.model().train(f.train_params(runs_root, n_epochs=1))
    model = f.model()
    model.freeze("layers.0.*")
    tuned = model.train(f.train_params(runs_root, n_epochs=1))
    rows = {r.what: r for r in drift_report(plain, tuned).rows}
    assert rows["frozen"].changes_run_id is True
    assert rows["frozen"].now == ["layers.0.weight", "layers.0.bias"]
