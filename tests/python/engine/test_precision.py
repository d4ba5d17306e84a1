"""Precision policies (§2.2): declaration, resolution, the update order and the records.

fp16 is CUDA-only. Where a test needs the scaler path on this CPU-only machine it lets
the CPU "run" fp16 by patching ``device_can_run`` (CPU autocast does support float16),
so the GradScaler path, its checkpointed state and its resume are exercised for real.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab import (
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    NNTrainParams,
    PrecisionPolicy,
    PrecisionUnsupportedError,
    ResumeError,
)
from nnx_lab.engine import precision as engine_precision
from nnx_lab.errors import ConfigError
from nnx_lab.precision import REFERENCE_TOLERANCES, ResolvedPrecision

# Bitwise comparisons between runs: one intra-op thread keeps reductions in one order.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def cpu_fp16(monkeypatch):
    """Let the CPU run fp16 (autocast float16 + a CPU GradScaler) for this test."""
    real = engine_precision.device_can_run

    def can_run(device_type, mode):
        if (device_type, mode) == ("cpu", "fp16"):
            return True, None
        return real(device_type, mode)

    monkeypatch.setattr(engine_precision, "device_can_run", can_run)


def _batches(n=64, batch=16):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(n, 8, generator=g)
    return DataLoader(TensorDataset(X, (X @ w).argmax(1)), batch_size=batch, shuffle=True)


def _model(precision=None, **kw):
    return NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.1),
        params=NNModelParams(precision=precision, **kw),
    )


def _params(root, n_epochs=1, **kw):
    base = {
        "n_epochs": n_epochs,
        "seed": 1,
        "train_loader": _batches(),
        "val_loader": _batches(32),
        "runs_root": str(root),
    }
    return NNTrainParams(**{**base, **kw})


def _runs(root):
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


# -- declaring a policy -----------------------------------------------------------------------
def test_a_policy_names_a_mode_and_an_optional_fp32_fallback():
    assert PrecisionPolicy("bf16").to_json() == {"mode": "bf16", "fallback": None}
    assert PrecisionPolicy("fp16", fallback="fp32").fallback == "fp32"
    with pytest.raises(ConfigError, match=r"PrecisionPolicy.mode='fp8'.*'fp32', 'fp16', 'bf16'"):
        PrecisionPolicy("fp8")
    with pytest.raises(ConfigError, match=r"PrecisionPolicy.fallback='bf16'"):
        PrecisionPolicy("fp16", fallback="bf16")
    with pytest.raises(ConfigError, match=r"NNModelParams\.precision"):
        NNModelParams(precision=16)
    assert NNModelParams(precision="bf16").precision == PrecisionPolicy("bf16")


def test_explicit_fp32_normalizes_to_no_policy_and_keeps_the_run_id(tmp_path):
    for explicit in (PrecisionPolicy("fp32"), PrecisionPolicy("fp32", fallback="fp32"), "fp32"):
        params = NNModelParams(precision=explicit)
        assert params.precision is None
        assert params == NNModelParams()
        assert params.to_json() == NNModelParams().to_json()
    default = _model().train(_params(tmp_path / "a"))
    explicit = _model(PrecisionPolicy("fp32")).train(_params(tmp_path / "b"))
    assert default.id == explicit.id
    assert _model("bf16").train(_params(tmp_path / "c")).id != default.id


def test_fp16_on_cpu_is_refused_before_any_run_directory(tmp_path):
    assert nnx_lab.PrecisionUnsupportedError is PrecisionUnsupportedError
    with pytest.raises(PrecisionUnsupportedError, match=r"fp16 needs a CUDA device.*fallback="):
        _model(PrecisionPolicy("fp16"))
    assert _runs(tmp_path) == []


def test_the_policy_is_resolved_again_before_a_run_is_reserved(tmp_path, monkeypatch):
    model = _model(PrecisionPolicy("bf16"))
    assert model.precision.effective == "bf16"
    monkeypatch.setattr(
        engine_precision, "device_can_run", lambda device, mode: (mode == "fp32", "gone")
    )
    root = tmp_path / "runs"
    with pytest.raises(PrecisionUnsupportedError, match="gone"):
        model.train(_params(root))
    assert not root.exists()


def test_a_fallback_trains_fp32_and_records_why(tmp_path):
    model = _model(PrecisionPolicy("fp16", fallback="fp32"))
    run = model.train(_params(tmp_path))
    record = run.precision.record()
    assert (record["requested"], record["effective"]) == ("fp16", "fp32")
    assert "fp16 needs a CUDA device" in record["fallback_reason"]
    loaded = NNRun.load(run.id, runs_root=tmp_path)
    assert loaded.precision.record() == record
    assert loaded.metadata["precision"]["fallback_reason"] == record["fallback_reason"]
    metadata = (run.run_dir / "metadata.yaml").read_text()
    assert "fallback_reason: fp16 needs a CUDA device" in metadata


def test_the_record_holds_requested_effective_tf32_and_coverage(tmp_path):
    allow = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    matmul = torch.get_float32_matmul_precision()
    run = _model("bf16").train(_params(tmp_path))
    record = run.precision.record()
    assert record["requested"] == record["effective"] == "bf16"
    assert record["fallback_reason"] is None
    assert record["covers"] == ["train", "evaluate", "predict", "predict_proba", "lr_finder"]
    assert record["not_covered"] == []
    tf32 = record["tf32"]
    assert tf32["set_by_nnx_lab"] is False
    assert tf32["applies"] is torch.cuda.is_available()
    assert (tf32["matmul_allow_tf32"], tf32["cudnn_allow_tf32"]) == allow
    assert tf32["float32_matmul_precision"] == matmul
    # Reported, never set.
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == allow
    assert torch.get_float32_matmul_precision() == matmul
    assert NNRun.load(run.id, runs_root=tmp_path).precision == run.precision


class _Matmul:
    """Stands in for ``torch.backends.cuda.matmul`` with torch's newer setting made.

    The real object is swapped whole (and restored by monkeypatch): an attribute set on
    torch's own cuBLAS module cannot be deleted again at teardown.
    """

    allow_tf32 = False
    fp32_precision = "tf32"


def test_an_fp32_precision_setting_is_reported_when_made(monkeypatch):
    before = torch.backends.cuda.matmul
    monkeypatch.setattr(torch.backends.cuda, "matmul", _Matmul())
    tf32 = engine_precision.resolve_precision(None, False, "cpu").tf32
    assert tf32["fp32_precision"] == {"cuda.matmul": "tf32"}
    assert tf32["matmul_allow_tf32"] is False
    monkeypatch.undo()
    assert torch.backends.cuda.matmul is before
    assert engine_precision.resolve_precision(None, False, "cpu").tf32["fp32_precision"] is None


# -- what autocast wraps ----------------------------------------------------------------------
class _DtypeSpy:
    def __init__(self, module):
        self.seen: list[torch.dtype] = []
        module.register_forward_hook(lambda m, i, out: self.seen.append(out.dtype))


def test_bf16_autocasts_forward_and_loss_only_and_params_stay_fp32(tmp_path):
    model = _model("bf16")
    spy = _DtypeSpy(model.net.layers[0])
    grads: list[torch.dtype] = []
    model.net.layers[0].weight.register_hook(lambda g: grads.append(g.dtype))
    model.train(_params(tmp_path, val_loader=None))
    assert set(spy.seen) == {torch.bfloat16}
    assert set(grads) == {torch.float32}  # backward lands in the fp32 parameters
    assert {p.dtype for p in model.net.parameters()} == {torch.float32}
    ckpt = NNCheckpoint.load(run=model.last_run.id, runs_root=tmp_path)
    assert {t.dtype for t in ckpt.model_state.values()} == {torch.float32}


def test_evaluate_and_predict_run_under_the_policy_and_return_float32(tmp_path):
    model = _model("bf16")
    model.train(_params(tmp_path))
    spy = _DtypeSpy(model.net.layers[0])
    X = torch.randn(10, 8)
    model.net.train()
    prediction = model.predict(X)
    assert model.net.training  # predict restores the mode it found
    assert prediction.logits.dtype == torch.float32
    assert spy.seen == [torch.bfloat16]
    result = model.evaluate(_batches(32))
    assert spy.seen[-1] == torch.bfloat16
    assert isinstance(result.loss, float)
    assert math.isfinite(result.loss)


def test_legacy_mixed_precision_keeps_its_meaning(tmp_path):
    params = NNModelParams(mixed_precision=True)
    assert params.precision is None
    assert params.to_json()["mixed_precision"] is True
    model = _model(mixed_precision=True)
    run = model.train(_params(tmp_path))
    record = run.precision.record()
    # fp16 + scaler on CUDA only; silently plain fp32 elsewhere, and it never reached
    # evaluation or prediction.
    assert (record["requested"], record["effective"]) == ("fp16", "fp32")
    assert "legacy" in record["fallback_reason"]
    assert record["covers"] == ["train"]
    assert record["not_covered"] == ["evaluate", "predict", "predict_proba", "lr_finder"]
    assert NNRun.load(run.id, runs_root=tmp_path).precision.legacy_mixed_precision is True
    spy = _DtypeSpy(model.net.layers[0])
    assert model.predict(torch.randn(4, 8)).logits.dtype == torch.float32
    assert spy.seen == [torch.float32]


def test_legacy_mixed_precision_refuses_another_policy():
    for mode in ("bf16", "fp32"):
        with pytest.raises(ConfigError, match="mixed_precision=True means fp16"):
            NNModelParams(mixed_precision=True, precision=PrecisionPolicy(mode))
    both = NNModelParams(mixed_precision=True, precision=PrecisionPolicy("fp16", "fp32"))
    resolved = engine_precision.resolve_precision(both.precision, True, "cpu")
    assert resolved.covers() == [
        "train",
        "evaluate",
        "predict",
        "predict_proba",
        "lr_finder",
    ]  # the explicit policy governs
    assert resolved.effective == "fp32"


# -- precision_support ------------------------------------------------------------------------
def test_precision_support_reports_every_cell():
    table = nnx_lab.precision_support()
    assert set(table) == {"cpu", "cuda", "mps"}
    assert table["cpu"] == {"fp32": "verified", "fp16": "unsupported", "bf16": "verified"}
    if not torch.cuda.is_available():
        assert table["cuda"] == dict.fromkeys(("fp32", "fp16", "bf16"), "unverified")
    else:  # a CUDA host: present but unchecked by a fixture on this machine
        assert table["cuda"]["fp32"] == "supported"
    assert table["mps"]["fp16"] == table["mps"]["bf16"] == "unsupported"
    for device, row in table.items():
        for mode, value in row.items():
            if value == "verified":
                assert (device, mode) in REFERENCE_TOLERANCES


# -- the update: unscale -> normalize -> finite check -> clip -> step --------------------------
def _updater(precision, scaler=None, clip=None):
    """An Updater over one SGD parameter (lr 1: the step is minus the gradient)."""
    from nnx_lab.engine.update import Updater

    param = torch.nn.Parameter(torch.zeros(4))
    return Updater(torch.optim.SGD([param], lr=1.0), scaler, precision, clip), param


def test_the_update_unscales_then_normalizes_then_clips_then_steps():
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    updater, param = _updater(ResolvedPrecision("fp16", "fp16", "cpu"), scaler, clip=1.0)
    true_grad = torch.tensor([3.0, 4.0, 0.0, 0.0])  # norm 5
    scaler.scale(torch.ones(()))  # what a backward through the scaler does first
    param.grad = true_grad * 8.0 * 2  # scaled by the scaler, summed over 2 samples
    updater.step(2)
    # Clipped after unscaling and normalizing: the step is the true gradient at norm 1.
    assert torch.allclose(param.detach(), -true_grad / 5.0)


def test_fp16_skips_a_non_finite_update_through_the_scaler():
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    updater, param = _updater(ResolvedPrecision("fp16", "fp16", "cpu"), scaler, clip=1.0)
    scaler.scale(torch.ones(()))
    param.grad = torch.tensor([1.0, float("inf"), 0.0, 0.0])
    updater.step()
    assert torch.equal(param.detach(), torch.zeros(4))  # skipped
    assert scaler.get_scale() == 4.0  # and backed off


def test_bf16_raises_rather_than_apply_a_non_finite_update():
    updater, param = _updater(ResolvedPrecision("bf16", "bf16", "cpu"))
    param.grad = torch.tensor([1.0, float("nan"), 0.0, 0.0])
    with pytest.raises(FloatingPointError, match="non-finite gradients at step 1 under bf16"):
        updater.step(step_number=1)
    assert torch.equal(param.detach(), torch.zeros(4))


def test_a_bf16_run_with_non_finite_gradients_fails_without_updating(tmp_path):
    model = _model("bf16")
    with torch.no_grad():
        model.net.layers[0].weight[0, 0] = float("inf")
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(FloatingPointError):
        model.train(_params(tmp_path))
    after = model.net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.last_run.status.value == "failed"
    assert "FloatingPointError" in NNRun.load(model.last_run.id, runs_root=tmp_path).error


# -- the scaler travels with checkpoints (fp16 emulated on the CPU) ---------------------------
def test_fp16_scaler_state_travels_and_resume_continues_bit_for_bit(tmp_path, cpu_fp16):
    policy = PrecisionPolicy("fp16")
    full_model = _model(policy)
    full = full_model.train(_params(tmp_path, 4))
    first = _model(policy).train(_params(tmp_path, 2))
    state = NNCheckpoint.load_training_state(run=first.id, runs_root=tmp_path)
    assert state["precision"]["effective"] == "fp16"
    assert set(state["scaler"]) >= {"scale", "_growth_tracker"}
    assert state["scaler"]["_growth_tracker"] == 8  # 2 epochs x 4 steps without overflow
    resumed_model = _model(policy)
    resumed = resumed_model.train(_params(tmp_path, 2, resume_from_run_id=first.id))
    assert "scaler" in resumed.resume_status["restored"]
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    end = NNCheckpoint.load_training_state(run=full.id, runs_root=tmp_path)
    assert (
        end["scaler"]
        == NNCheckpoint.load_training_state(run=resumed.id, runs_root=tmp_path)["scaler"]
    )
    # Into another precision: refused, naming the scaler that would disappear.
    with pytest.raises(ResumeError, match=r"precision mismatch.*GradScaler presence mismatch"):
        _model().train(_params(tmp_path, 1, resume_from_run_id=first.id))
    bf16 = _model("bf16").train(_params(tmp_path, 1))
    with pytest.raises(ResumeError, match="trained in bf16, this model resolves to fp16"):
        _model(policy).train(_params(tmp_path, 1, resume_from_run_id=bf16.id))


def test_a_bf16_regression_tracks_fp32(tmp_path):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 8, generator=g)
    batches = [(X[:32], X[:32].sum(1, keepdim=True)), (X[32:], X[32:].sum(1, keepdim=True))]
    losses = {}
    for mode in ("fp32", "bf16"):
        model = NNModel(
            net_params=NNParams(input_dim=8, output_dim=1, hidden_dims=[16]),
            params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, precision=mode),
        )
        run = model.train(
            NNTrainParams(n_epochs=3, train_loader=batches, runs_root=str(tmp_path / mode))
        )
        losses[mode] = [p.train_edp.loss for p in run.idps]
        assert model.predict(X).logits.dtype == torch.float32
    assert losses["bf16"] == pytest.approx(
        losses["fp32"], rel=REFERENCE_TOLERANCES[("cpu", "bf16")]["loss_rtol"]
    )


def test_from_checkpoint_resolves_the_policy_on_the_destination(tmp_path, monkeypatch):
    real = engine_precision.device_can_run
    monkeypatch.setattr(  # an fp16 run, as on a CUDA host
        engine_precision,
        "device_can_run",
        lambda device, mode: (True, None) if mode == "fp16" else real(device, mode),
    )
    run = _model(PrecisionPolicy("fp16")).train(_params(tmp_path))
    monkeypatch.setattr(engine_precision, "device_can_run", real)  # now "on a CPU"
    ckpt = NNCheckpoint.load(run=run.id, runs_root=tmp_path)
    with pytest.raises(PrecisionUnsupportedError, match="fp16 needs a CUDA device"):
        NNModel.from_checkpoint(checkpoint=ckpt)
    for replacement, effective in (("fp32", "fp32"), (PrecisionPolicy("bf16"), "bf16")):
        model = NNModel.from_checkpoint(checkpoint=ckpt, precision=replacement)
        assert model.precision.effective == effective
        assert model.predict(torch.randn(3, 8)).logits.dtype == torch.float32
