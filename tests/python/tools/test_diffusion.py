"""nnx_lab.diffusion (§3.3): schedules, the DDPM loss as an objective and as a step
against a hand-written DDPM step, the generator's checkpointed state (2 + 2 epochs equal
4 bit for bit), previews that leave it alone, seeded sampling, refusals before any run
directory exists, and the model rebuilt from its checkpoint."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    ObjectiveContext,
    PrecisionPolicy,
    TrainStepContext,
)
from nnx_lab.diffusion import (
    DiffusionMLP,
    NoiseSchedulers,
    denoising_chain,
    diffusion_mlp_spec,
    diffusion_objective,
    diffusion_train_step_factory,
    sample,
)
from nnx_lab.errors import ConfigError, DataError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

T = 20


def _points(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    return centres[torch.randint(0, 3, (n,), generator=g)] + 0.2 * torch.randn(n, 2, generator=g)


def _batches(n=96, size=32):
    """Batches of points alone: they belong to the step (docs/custom_training.md)."""
    X = _points(n)
    return [X[i : i + size] for i in range(0, n, size)]


def _reference_loss(net, x0, gen, betas):
    """A hand-written DDPM training step (Ho et al. 2020, algorithm 1)."""
    alpha_bar = torch.cumprod(1.0 - betas, dim=0)
    t = torch.randint(0, len(betas), (len(x0),), generator=gen)
    eps = torch.randn(x0.shape, generator=gen)
    a = alpha_bar.sqrt().float()[t].unsqueeze(1)
    b = (1.0 - alpha_bar).sqrt().float()[t].unsqueeze(1)
    return F.mse_loss(net(a * x0 + b * eps, t), eps)


# --- schedules -----------------------------------------------------------------------


def test_the_linear_schedule_is_betas_evenly_spaced_in_float64():
    schedule = NoiseSchedulers.LINEAR(T, beta_start=1e-4, beta_end=0.02)
    assert schedule.betas.dtype == torch.float64
    assert schedule.T == T
    assert schedule.betas[0].item() == 1e-4
    assert schedule.betas[-1].item() == 0.02
    assert torch.allclose(
        schedule.betas.diff(), torch.full((T - 1,), (0.02 - 1e-4) / (T - 1), dtype=torch.float64)
    )
    assert torch.equal(schedule.alphas, 1.0 - schedule.betas)
    expected, running = [], 1.0
    for beta in schedule.betas.tolist():
        running *= 1.0 - beta
        expected.append(running)
    assert torch.allclose(
        schedule.alpha_bar, torch.tensor(expected, dtype=torch.float64), rtol=1e-14
    )
    assert schedule.posterior_variance[0].item() == 0.0  # x_0 is not noised further


def test_the_cosine_schedule_follows_its_alpha_bar_formula():
    s = 0.008
    schedule = NoiseSchedulers.COSINE(T, s=s, max_beta=0.999)

    def f(t):
        return math.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2

    expected = [f(t + 1) / f(0) for t in range(T)]
    # the last beta is clipped at max_beta; every earlier alpha_bar is the formula's
    assert torch.allclose(
        schedule.alpha_bar[:-1], torch.tensor(expected[:-1], dtype=torch.float64), rtol=1e-12
    )
    assert schedule.betas[-1].item() == 0.999
    assert bool((schedule.betas[:-1] < 0.999).all())
    assert bool((schedule.betas > 0).all())


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: NoiseSchedulers.LINEAR(0), "NoiseSchedulers T"),
        (lambda: NoiseSchedulers.LINEAR(10.0), "NoiseSchedulers T"),
        (lambda: NoiseSchedulers.LINEAR(10, beta_start=0.0), "beta_start"),
        (lambda: NoiseSchedulers.LINEAR(10, beta_end=1.0), "beta_end"),
        (lambda: NoiseSchedulers.LINEAR(10, beta_start=0.02, beta_end=0.01), "beta_end"),
        (lambda: NoiseSchedulers.COSINE(10, s=-0.1), "COSINE s"),
        (lambda: NoiseSchedulers.COSINE(10, max_beta=1.0), "max_beta"),
        (lambda: diffusion_objective("linear"), "diffusion_objective(schedule)"),
        (lambda: diffusion_train_step_factory(None), "factory(schedule)"),
        (lambda: diffusion_objective(NoiseSchedulers.LINEAR(5), seed=-1), "seed"),
        (lambda: diffusion_mlp_spec(2, hidden_dim=0), "hidden_dim"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, field):
    with pytest.raises(ConfigError, match=re.escape(field)):
        make()


# --- the loss against a hand-written DDPM step ---------------------------------------


def _ctx(window=1):
    return ObjectiveContext(
        step=1,
        epoch=0,
        micro_batch=0,
        window_size=window,
        precision=None,
        device=torch.device("cpu"),
        loss=None,
    )


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_the_objective_equals_a_hand_written_ddpm_step(kind):
    schedule = NoiseSchedulers.LINEAR(T) if kind == "linear" else NoiseSchedulers.COSINE(T)
    torch.manual_seed(0)
    net, ref = DiffusionMLP(2, 16, 2, 8), DiffusionMLP(2, 16, 2, 8)
    ref.load_state_dict(net.state_dict())
    x0 = _points(32)
    objective = diffusion_objective(schedule, seed=7)
    (term,) = objective(net, (x0, x0), _ctx()).terms
    expected = _reference_loss(ref, x0, torch.Generator().manual_seed(7), schedule.betas)
    assert term.name == "mse"
    assert torch.equal(term.numerator, expected)
    term.numerator.backward()
    expected.backward()
    for (name, p), q in zip(net.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    # inside an accumulation window the term is the sum over its element count
    (windowed,) = objective(net, x0, _ctx(window=2)).terms
    gen = torch.Generator().manual_seed(7)
    _reference_loss(ref, x0, gen, schedule.betas)
    second = _reference_loss(ref, x0, gen, schedule.betas)  # the generator's second draw
    assert windowed.denominator == x0.numel()
    assert torch.allclose(windowed.numerator / windowed.denominator, second, rtol=1e-6)
    assert not torch.equal(second, expected)


def test_the_step_equals_a_hand_written_ddpm_update():
    schedule = NoiseSchedulers.LINEAR(T)
    torch.manual_seed(0)
    net, ref = DiffusionMLP(2, 16, 2, 8), DiffusionMLP(2, 16, 2, 8)
    ref.load_state_dict(net.state_dict())
    opt, ref_opt = (
        torch.optim.Adam(net.parameters(), 1e-2),
        torch.optim.Adam(ref.parameters(), 1e-2),
    )
    step, gen = diffusion_train_step_factory(schedule, seed=3), torch.Generator().manual_seed(3)
    reported = []
    for i, x0 in enumerate(_batches()):
        ctx = TrainStepContext(
            model=net,
            batch=(x0,),
            optimizer=opt,
            scaler=None,
            grad_clip_norm=None,
            extra_metrics=None,
            accumulate_grad_batches=1,
            batch_idx=i,
            epoch_idx=0,
            is_last_batch=None,
            accumulation_state={},
            precision=None,
            report_update=lambda: reported.append(1),
            device=torch.device("cpu"),
        )
        edp = step(ctx)
        ref_opt.zero_grad()
        loss = _reference_loss(ref, x0, gen, schedule.betas)
        loss.backward()
        ref_opt.step()
        assert edp.loss == float(loss.detach())
        assert edp.samples == len(x0)
    assert len(reported) == 3
    for name, value in net.state_dict().items():
        assert torch.equal(value, ref.state_dict()[name]), name


# --- runs: resume, previews, refusals, reload ----------------------------------------


def _model(**kw):
    return NNModel(
        params=NNModelParams(
            net=diffusion_mlp_spec(2, 16, 2, 8), loss=Losses.MEAN_SQUARED_ERROR, **kw
        )
    )


def _params(root, n_epochs, **kw):
    return NNTrainParams(
        n_epochs=n_epochs,
        seed=0,
        train_loader=_batches(),
        optim=NNOptimParams(max_lr=1e-2),
        runs_root=str(root),
        **kw,
    )


def _hook(kind, schedule, seed=5):
    if kind == "objective":
        return {"objective": diffusion_objective(schedule, seed=seed)}
    return {"train_step_fn": diffusion_train_step_factory(schedule, seed=seed)}


def _steps(run):
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(x["step"], x["loss"]) for x in lines if x["event"] == "step"]


@pytest.mark.parametrize("kind", ["objective", "train_step_fn"])
def test_a_split_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path, kind):
    schedule = NoiseSchedulers.COSINE(T)
    full_model, full_hook = _model(), _hook(kind, schedule)
    full = full_model.train(_params(tmp_path, 4), **full_hook)
    first = _model().train(_params(tmp_path, 2), **_hook(kind, schedule))
    resumed_model, resumed_hook = _model(), _hook(kind, schedule)
    resumed = resumed_model.train(_params(tmp_path, 2, resume_from_run_id=first.id), **resumed_hook)
    assert "diffusion" in resumed.resume_status["restored"]
    assert _steps(resumed) == _steps(full)
    assert len(_steps(full)) == 12
    for name, weight in full_model.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[name]), name
    ours, theirs = (next(iter(h.values())).generator for h in (full_hook, resumed_hook))
    assert torch.equal(ours.get_state(), theirs.get_state())
    files = {p.suffix for p in first.run_dir.rglob("*") if p.is_file()}
    assert ".safetensors" in files
    assert not files & {".pt", ".pkl", ".pickle"}


@pytest.mark.parametrize(
    ("model", "hook", "extra", "field"),
    [
        (lambda: _model(), "train_step_fn", {"accumulation_steps": 2}, "accumulation_steps"),
        (
            lambda: NNModel(net_params=NNParams(input_dim=2, output_dim=2, hidden_dims=[8])),
            "objective",
            {},
            "NNModelParams.net",
        ),
        (
            lambda: NNModel(
                params=NNModelParams(
                    net=diffusion_mlp_spec(3, 8, 1, 4), loss=Losses.MEAN_SQUARED_ERROR
                )
            ),
            "objective",
            {},
            "train_loader",
        ),
    ],
)
def test_a_request_the_loss_cannot_train_is_refused_before_any_run(
    tmp_path, model, hook, extra, field
):
    with pytest.raises((ConfigError, DataError), match=field):
        model().train(_params(tmp_path, 1, **extra), **_hook(hook, NoiseSchedulers.LINEAR(T)))
    assert not any(tmp_path.iterdir())


def test_a_loader_of_points_and_an_x_y_loader_train_alike(tmp_path):
    X = _points()
    runs = []
    for dataset in (TensorDataset(X), TensorDataset(X, torch.zeros(len(X), 2))):
        loader = DataLoader(
            dataset, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1)
        )
        params = _params(tmp_path, 2).replace(train_loader=loader)
        runs.append(_model().train(params, **_hook("objective", NoiseSchedulers.LINEAR(T))))
    assert _steps(runs[0]) == _steps(runs[1])  # the labels of a pair are not used


def test_a_resume_with_another_seed_is_refused_before_any_run(tmp_path):
    schedule = NoiseSchedulers.LINEAR(T)
    first = _model().train(_params(tmp_path, 1), **_hook("objective", schedule, seed=5))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(Exception, match="seeded with 5"):
        _model().train(
            _params(tmp_path, 1, resume_from_run_id=first.id), **_hook("objective", schedule, 6)
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == before


class Preview:
    """A per-epoch sample preview, as the notebook's figure callback draws."""

    def __init__(self, schedule):
        self.schedule, self.shown = schedule, []

    def on_epoch_end(self, ctx):
        gen = torch.Generator().manual_seed(11)
        self.shown.append(sample(ctx.model, self.schedule, 8, generator=gen))


@pytest.mark.parametrize("kind", ["objective", "train_step_fn"])
def test_a_preview_never_moves_the_training(tmp_path, kind):
    schedule = NoiseSchedulers.LINEAR(T)
    plain_model, plain_hook = _model(), _hook(kind, schedule)
    plain = plain_model.train(_params(tmp_path / "a", 3), **plain_hook)
    preview = Preview(schedule)
    watched_model, watched_hook = _model(), _hook(kind, schedule)
    watched = watched_model.train(_params(tmp_path / "b", 3), callbacks=[preview], **watched_hook)
    assert len(preview.shown) == 3
    assert not torch.equal(preview.shown[0], preview.shown[-1])
    assert _steps(plain) == _steps(watched)
    for name, weight in plain_model.net.state_dict().items():
        assert torch.equal(weight, watched_model.net.state_dict()[name]), name
    ours, theirs = (next(iter(h.values())).generator for h in (plain_hook, watched_hook))
    assert torch.equal(ours.get_state(), theirs.get_state())
    assert watched_model.net.training  # the preview put the training mode back


def test_seeded_sampling_is_reproducible_and_touches_no_global_stream():
    schedule = NoiseSchedulers.LINEAR(T)
    torch.manual_seed(0)
    net = DiffusionMLP(2, 16, 2, 8)
    state = torch.get_rng_state()
    a = sample(net, schedule, 16, generator=torch.Generator().manual_seed(1))
    b = sample(net, schedule, 16, generator=torch.Generator().manual_seed(1))
    c = sample(net, schedule, 16, generator=torch.Generator().manual_seed(2))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert a.shape == (16, 2)
    assert net.training  # its mode is put back
    chain = denoising_chain(net, schedule, 16, generator=torch.Generator().manual_seed(1))
    assert chain.states.shape == (T + 1, 16, 2)
    assert chain.timesteps[0] == T
    assert torch.equal(chain.samples, a)
    assert torch.equal(chain.at(0), a)
    assert torch.equal(chain.at(T), torch.randn(16, 2, generator=torch.Generator().manual_seed(1)))


def test_a_hand_written_ancestral_sampler_gives_the_same_samples():
    schedule = NoiseSchedulers.COSINE(T)
    torch.manual_seed(0)
    net = DiffusionMLP(2, 16, 2, 8).eval()
    gen = torch.Generator().manual_seed(4)
    betas = schedule.betas
    alpha_bar = torch.cumprod(1 - betas, 0)
    prev = torch.cat([torch.ones(1, dtype=torch.float64), alpha_bar[:-1]])
    x = torch.randn(8, 2, generator=gen)
    with torch.no_grad():
        for t in reversed(range(T)):
            eps = net(x, torch.full((8,), t))
            mean = (x - (betas[t] / (1 - alpha_bar[t]).sqrt()).float() * eps) / (
                1 - betas[t]
            ).sqrt().float()
            sigma = (betas[t] * (1 - prev[t]) / (1 - alpha_bar[t])).sqrt().float()
            x = mean + sigma * torch.randn(8, 2, generator=gen) if t > 0 else mean
    ours = sample(net, schedule, 8, generator=torch.Generator().manual_seed(4))
    assert torch.allclose(ours, x, rtol=1e-5, atol=1e-6)


def test_the_step_under_a_reduced_precision_is_refused_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match=r"diffusion_train_step_factory\(.*full_precision_only"):
        _model(precision=PrecisionPolicy("bf16")).train(
            _params(tmp_path, 1),
            train_step_fn=diffusion_train_step_factory(NoiseSchedulers.LINEAR(T)),
        )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda net, s: sample(net, s, 0), "sample n"),
        (lambda net, s: sample(net, s, 4, generator=1), "sample generator"),
        (lambda net, s: sample(net, "cosine", 4), r"sample\(schedule\)"),
        (lambda net, s: sample(torch.nn.Linear(2, 2), s, 4), "sample shape"),
        (lambda net, s: sample(net, s, 4, variance="large"), "sample variance"),
    ],
)
def test_bad_sampling_arguments_are_refused(call, field):
    with pytest.raises(ConfigError, match=field):
        call(DiffusionMLP(2, 8, 1, 4), NoiseSchedulers.LINEAR(5))


def test_the_schedule_and_the_seed_enter_the_run_id(tmp_path):
    ids = {
        _model().train(_params(tmp_path, 1), **_hook(kind, schedule, seed)).id
        for kind in ("objective", "train_step_fn")
        for schedule in (NoiseSchedulers.LINEAR(T), NoiseSchedulers.LINEAR(T + 1))
        for seed in (5, 6)
    }
    assert len(ids) == 8


def test_the_model_reloads_from_its_checkpoint_by_recipe(tmp_path):
    schedule = NoiseSchedulers.LINEAR(T)
    model = _model()
    run = model.train(_params(tmp_path, 2), **_hook("objective", schedule))
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run.id, runs_root=str(tmp_path)))
    assert isinstance(rebuilt.net, DiffusionMLP)
    for name, weight in model.net.state_dict().items():
        assert torch.equal(weight, rebuilt.net.state_dict()[name]), name
    a = sample(model, schedule, 8, generator=torch.Generator().manual_seed(2))
    b = sample(rebuilt, schedule, 8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)
    assert "nnx_lab.diffusion_mlp" in (run.run_dir / "run.yaml").read_text()  # a name, no code
