"""Checkpoints, reload, NNRun.load and the no-pickle rule."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch

from nnx_lab import Checkpoints, Devices, NNCheckpoint, NNModel, NNRun, RunStatus

RUN_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    model = f.model()
    run = model.train(f.train_params(root, n_epochs=4))
    return root, model, run


def test_a_reloaded_model_predicts_bit_for_bit_what_the_original_did(trained):
    root, model, run = trained
    X = torch.randn(100, 8)
    ckpt = NNCheckpoint.load(run=run.id, type=Checkpoints.LAST, runs_root=root)
    assert ckpt.epoch == 4
    assert ckpt.step == len(run.idps)
    again = NNModel.from_checkpoint(checkpoint=ckpt, device=Devices.CPU)
    a, b = model.predict(X=X), again.predict(X=X)
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.classes, b.classes)
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, again.net.state_dict()[k])


def test_best_is_the_epoch_with_the_lowest_validation_error(trained):
    root, _, run = trained
    best = NNCheckpoint.load(run=run, type="best", runs_root=root)
    errors = [(e["val"]["error"], e["epoch"]) for e in run.epochs]
    first_min = min(errors, key=lambda t: (t[0], t[1]))
    assert best.epoch == first_min[1]
    assert run.epochs[best.epoch - 1]["improved"]


def test_predict_accepts_tensors_arrays_tuples_and_loaders(trained):
    _, model, _ = trained
    X = torch.randn(70, 8)
    ref = model.predict(X).logits
    assert torch.equal(model.predict(X.numpy()).logits, ref)
    assert torch.equal(model.predict((X, torch.zeros(70))).logits, ref)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, torch.zeros(70)), batch_size=32
    )
    assert torch.allclose(model.predict(loader).logits, ref, atol=1e-6)
    assert model.net.training  # predict restored the training mode


def test_nnrun_load_rehydrates_the_history(trained):
    root, _, run = trained
    loaded = NNRun.load(id=run.id, runs_root=root)
    assert loaded.status is RunStatus.FINISHED
    assert len(loaded.idps) == len(run.idps)
    for a, b in zip(loaded.idps, run.idps, strict=True):
        assert (a.iteration, a.epoch, a.batch, a.lr) == (b.iteration, b.epoch, b.batch, b.lr)
        assert a.train_edp == b.train_edp
        assert a.val_edp == b.val_edp
    assert loaded.net_params == run.net_params
    assert loaded.precision.effective == "fp32"


def test_nnrun_load_of_an_unknown_id_names_the_root(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path.resolve())):
        NNRun.load(id="0" * 32, runs_root=tmp_path)


def test_the_run_directory_holds_no_pickle(trained):
    root, _, run = trained
    allowed = {".safetensors", ".json", ".yaml", ".jsonl"}
    everything = [p for p in (root / run.id).rglob("*") if p.is_file()]
    locks = [p for p in everything if p.name.endswith(".lock")]
    assert {p.name for p in locks} <= {".lock", ".writer.lock"}
    assert all(p.stat().st_size == 0 for p in locks)  # lock files hold nothing
    files = [p for p in everything if p not in locks]
    assert files
    for p in files:
        assert p.suffix in allowed, p
        head = p.read_bytes()[:4]
        assert head[:1] != b"\x80", f"{p} starts like a pickle"
        assert head != b"PK\x03\x04", f"{p} is a zip archive, as torch.save writes"
    for p in (root / run.id / "checkpoints").glob("*.safetensors"):
        from safetensors import safe_open

        with safe_open(str(p), framework="pt") as fh:  # parses as safetensors
            assert any(k.startswith("model.") for k in fh.keys())  # noqa: SIM118


def test_no_code_path_pickles_or_unpickles():
    """No pickle, torch.save or unrestricted torch.load anywhere in the package."""
    import re
    from pathlib import Path

    import nnx_lab

    banned = re.compile(
        r"^\s*(import pickle|from pickle|import dill|import cloudpickle)|pickle\.(load|dump)"
        r"|torch\.save\(|np\.load\(.*allow_pickle=True"
    )
    sources = list(Path(nnx_lab.__file__).parent.rglob("*.py"))
    assert len(sources) > 20
    for path in sources:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not banned.search(line), f"{path}:{n}: {line.strip()}"
            if "torch.load(" in line:
                assert "weights_only=True" in line, f"{path}:{n}: {line.strip()}"


def test_load_with_training_state_of_a_missing_run_creates_nothing(tmp_path):
    assert NNCheckpoint.load_with_training_state(
        run="f" * 32, type=Checkpoints.LAST, runs_root=tmp_path
    ) == (None, None)
    assert list(tmp_path.iterdir()) == []


def test_reload_under_another_seed_does_not_disturb_the_callers_rng(trained):
    root, _, run = trained
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    NNModel.from_checkpoint(NNCheckpoint.load(run=run.id, runs_root=root))
    assert torch.equal(torch.rand(3), expected)


def test_concurrent_checkpoint_writers_are_kept_apart(tmp_path):
    """Writers in several threads (the lock is per run directory): every sidecar ends up
    naming a whole tensors file with its checksum, and no tensors file is left over."""
    import threading

    from nnx_lab.engine.checkpoint import write_checkpoint

    root = tmp_path / "runs"
    run_dir = root / RUN_ID
    (run_dir / "checkpoints").mkdir(parents=True)
    net = f.net_params()
    meta = {
        "run_id": RUN_ID,
        "net_params": net.to_json(),
        "model_params": f.model_params().to_json(),
    }
    errors = []

    def writer(seed: int) -> None:
        try:
            for i in range(15):
                state = {"w": torch.full((64, 64), float(seed * 100 + i))}
                write_checkpoint(
                    run_dir,
                    ["last", "best"],
                    model_state=state,
                    training_state=None,
                    meta={**meta, "step": seed * 100 + i},
                )
        except Exception as exc:  # surfaced below, with the thread's failure
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for type_ in (Checkpoints.LAST, Checkpoints.BEST):
        ckpt = NNCheckpoint.load(run=RUN_ID, type=type_, runs_root=root)  # checksum verified
        value = float(ckpt.model_state["w"][0, 0])
        assert torch.equal(ckpt.model_state["w"], torch.full((64, 64), value))
        assert value == ckpt.step  # the tensors and the sidecar come from one write
    files = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert len([n for n in files if n.endswith(".safetensors")]) == 2, files
    assert not [n for n in files if n.endswith(".tmp")], files
