"""``NNTrainParams(name=...)``: a label recorded in the run's metadata.yaml, never part
of its id; a plan's ``train.name`` flows into it; a rename while the run trains is kept
by every rewrite the run makes of its record afterwards (issue 21 §5)."""

from __future__ import annotations

import threading
import time

import engine_factories as f
import pytest
import yaml
from plan_factories import make_train_loader, make_val_loader

from nnx_lab import ExperimentPlan, list_runs
from nnx_lab.errors import ConfigError
from nnx_lab.runs import RUN_NAME_MAX, read_record, rename_run


def test_a_name_is_recorded_first_and_never_enters_the_run_id(runs_root):
    named = f.model().train(f.train_params(runs_root / "a", n_epochs=1, name=" high lr "))
    plain = f.model().train(f.train_params(runs_root / "b", n_epochs=1))
    assert named.id == plain.id
    text = (named.run_dir / "metadata.yaml").read_text()
    assert text.startswith("name: high lr\n")
    assert "name" not in read_record(plain.run_dir / "metadata.yaml")
    assert "high lr" not in (named.run_dir / "run.yaml").read_text()
    frame = list_runs(runs_root / "a")
    assert frame["name"].tolist() == ["high lr"]
    assert frame["best_mode"].tolist() == ["min"]  # the §2.11 signal: an error


@pytest.mark.parametrize("bad", ["", "two\nlines", "x" * (RUN_NAME_MAX + 1), 3, "a\u202eb"])
def test_a_bad_name_is_refused_before_anything_exists(runs_root, bad):
    with pytest.raises(ConfigError) as err:
        f.train_params(runs_root, name=bad)
    assert err.value.field == "NNTrainParams.name"
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_plans_name_names_its_run_and_never_its_id(tmp_path):
    plan = (
        ExperimentPlan()
        .with_net(input_dim=8, output_dim=3, hidden_dims=[8])
        .with_data(make_train_loader, val=make_val_loader, identity="toy")
        .with_epochs(1)
        .with_runs_root(str(tmp_path / "runs"))
    )
    named = plan.with_train(name="baseline")
    assert named.expected_run_id() == plan.expected_run_id()
    field = next(x for x in ExperimentPlan.fields() if x.path == "train.name")
    assert (field.section, field.in_run_id) == ("run", False)
    result = named.fit(report=False)
    assert read_record(result.run.run_dir / "metadata.yaml")["name"] == "baseline"


def test_a_rename_while_the_run_trains_survives_its_heartbeats_and_its_end(runs_root, monkeypatch):
    monkeypatch.setenv("NNX_HEARTBEAT_S", "0.05")  # many rewrites of metadata.yaml
    started = threading.Event()

    class Slow:
        def on_step_ended(self, event):
            started.set()
            time.sleep(0.02)

    params = f.train_params(runs_root, n_epochs=4, name="first", checkpoint_every_s=0)
    model = f.model()
    out = {}
    job = threading.Thread(target=lambda: out.update(run=model.train(params, callbacks=[Slow()])))
    job.start()
    assert started.wait(60)
    run_dir = runs_root / params_id(runs_root)
    beat = read_record(run_dir / "metadata.yaml")["heartbeat"]
    rename_run(run_dir, "renamed mid-run")
    job.join(120)
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert (meta["name"], meta["status"]) == ("renamed mid-run", "finished")
    assert meta["heartbeat"] > beat  # the writer went on writing its record
    assert out["run"].metadata["name"] == "renamed mid-run"


def params_id(root):
    (entry,) = [p for p in root.iterdir() if p.is_dir()]
    return entry.name


def test_a_run_never_parses_the_record_it_wrote_itself(runs_root, monkeypatch):
    # the reservation, each heartbeat, the BEST and the end rewrite metadata.yaml; each
    # must keep a name given since, yet none needs a parse while the file holds the
    # writer's own bytes (a parse costs a millisecond on a small run)
    from nnx_lab.runs import _naming

    parsed = []
    real = _naming.parse_record
    monkeypatch.setattr(_naming, "parse_record", lambda raw, p: parsed.append(p) or real(raw, p))
    run = f.model().train(f.train_params(runs_root, n_epochs=3, name="kept"))
    assert parsed == []
    assert read_record(run.run_dir / "metadata.yaml")["name"] == "kept"
