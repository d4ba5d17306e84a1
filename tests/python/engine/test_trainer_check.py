"""``Trainer.check``: every refusal ``Trainer.train`` makes before its run directory
exists, as one call with no side effect (a race checks a Trainer ``TrainJob`` with it).
Each case is refused by ``check`` with the very error ``train`` raises, and neither
leaves a run directory behind."""

from __future__ import annotations

import pytest
from trainer_factories import GAN, gan_model, gan_step, optims, trainer_params

from nnx_lab import Losses, MonitorSpec, NNModel, NNModelParams, Objective, Trainer
from nnx_lab.errors import NNxError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _bf16():
    return NNModel(
        module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, precision="bf16")
    )


# (what is wrong, the model to wrap, the params (from the runs root), train()'s keywords)
_REFUSED = [
    ("params of another type", gan_model, lambda r: object(), {"trainer_step_fn": gan_step}),
    ("no step", gan_model, trainer_params, {}),
    (
        "both hooks",
        gan_model,
        trainer_params,
        {"trainer_step_fn": gan_step, "objective": Objective(lambda n, b, c: None)},
    ),
    (
        "train_step_fn",
        gan_model,
        trainer_params,
        {"trainer_step_fn": gan_step, "train_step_fn": gan_step},
    ),
    ("objective of another type", gan_model, trainer_params, {"objective": object()}),
    ("a step that is not callable", gan_model, trainer_params, {"trainer_step_fn": 3}),
    (
        "a step under distributed=",
        gan_model,
        trainer_params,
        {"trainer_step_fn": gan_step, "distributed": object()},
    ),
    (
        "an overlap",
        gan_model,
        lambda r: trainer_params(r, optims=optims(d_glob="*")),
        {"trainer_step_fn": gan_step},
    ),
    (
        "an unowned parameter",
        gan_model,
        lambda r: trainer_params(r, optims=optims(d_glob="D.0.*")),
        {"trainer_step_fn": gan_step},
    ),
    (
        "a glob that selects nothing",
        gan_model,
        lambda r: trainer_params(r, optims=optims(d_glob="disc.*")),
        {"trainer_step_fn": gan_step},
    ),
    ("a step under bf16", _bf16, trainer_params, {"trainer_step_fn": gan_step}),
    (
        "a validation monitor without a val_loader",
        gan_model,
        lambda r: trainer_params(r, monitor=MonitorSpec("loss", split="val")),
        {"trainer_step_fn": gan_step},
    ),
    ("an empty salt", gan_model, trainer_params, {"trainer_step_fn": gan_step, "salt": ""}),
]


def _refusal(call):
    with pytest.raises((NNxError, TypeError)) as info:
        call()
    return type(info.value), str(info.value)


@pytest.mark.parametrize(("case", "model", "params", "kw"), _REFUSED, ids=[c[0] for c in _REFUSED])
def test_check_refuses_what_train_refuses_with_the_same_error(runs_root, case, model, params, kw):
    trainer, params = Trainer(model()), params(runs_root)  # the params build: train refuses
    checked = _refusal(lambda: trainer.check(params, **kw))
    assert trainer.last_step is None  # check keeps nothing
    trained = _refusal(lambda: trainer.train(params, **kw))
    assert checked == trained
    assert issubclass(checked[0], NNxError), checked  # a refusal, not a crash
    assert not runs_root.exists()


def test_check_says_the_run_id_train_records_and_creates_nothing(runs_root):
    trainer = Trainer(gan_model())
    gate = trainer.check(trainer_params(runs_root), trainer_step_fn=gan_step, banner=False)
    assert not runs_root.exists()
    assert trainer.last_step is None
    run = trainer.train(trainer_params(runs_root), trainer_step_fn=gan_step)
    assert gate.pre.run_id == run.id
    assert trainer.last_step is not None
