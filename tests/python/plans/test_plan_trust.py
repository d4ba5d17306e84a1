"""The trust model, tried as an adversary would: nothing named in a file is imported or
called until the user asks for it (``plan.resolve()``, ``fit()``), what a reference may
name is limited to what ``to_json`` writes, and a plan JSON passes one strict shape.

Each hostile module below writes a marker file when it is imported: the marker must
never appear where the promise says nothing runs.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import plan_factories as pf
import pytest

from nnx_lab import ConfigError, ExperimentPlan, drift_report
from nnx_lab.plans import PlanError, record_of, set_config_report
from nnx_lab.provenance import ExperimentManifest
from nnx_lab.runs import (
    PlanSchemaError,
    SchemaError,
    compare_many,
    list_runs,
    read_plan_file,
    run_record,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _quiet():
    before = set_config_report(False)
    yield
    set_config_report(before)


@pytest.fixture
def base(runs_root):
    return pf.toy_plan(runs_root, n_epochs=1)


def _hostile_module(folder: Path, name: str, marker: Path) -> None:
    """A module that leaves ``marker`` behind when its code runs (it is imported)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            Path({str(marker)!r}).write_text("imported")

            def make():
                Path({str(marker)!r}).write_text("called")
                return []
            """
        )
    )


@pytest.fixture
def forget_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("hostile_", "honest_", "pkg_")):
            sys.modules.pop(name, None)


# -- 1. reading, listing and comparing a run imports nothing it names ----------------------------
def test_a_run_folder_that_names_its_own_module_is_never_imported(
    base, runs_root, tmp_path, monkeypatch, forget_modules
):
    result = base.fit()
    run_id, folder = result.run.id, result.run.run_dir
    marker = tmp_path / "imported.txt"
    name = f"hostile_{uuid.uuid4().hex[:8]}"
    _hostile_module(folder, name, marker)
    # Two ways the module could be importable: the run folder itself on sys.path (a
    # notebook opened there), or the runs root's parent (``runs.<id>.name`` as a
    # namespace package).
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.syspath_prepend(str(runs_root.parent))
    planned = json.loads((folder / "plan.json").read_text())
    planned["record"]["code"] = [
        {"role": "data.train", "module": name, "qualname": "make", "kind": "function",
         "digest": "0" * 64},
        {"role": "callbacks[0]", "module": f"{runs_root.name}.{run_id}.{name}",
         "qualname": "make", "kind": "function", "digest": "1" * 64},
    ]  # fmt: skip
    (folder / "plan.json").write_text(json.dumps(planned))

    report = drift_report(run_id, runs_root=runs_root)
    record_of(run_id, runs_root=runs_root)
    record = run_record(run_id, runs_root)
    read_plan_file(folder)
    list_runs(runs_root)
    compare_many([record, record])
    drift_report(run_id, result, runs_root=runs_root)
    str(report), report.to_json()

    assert not marker.exists()
    # match this name only: the test helpers' module hostile_factories is loaded too
    assert not any(m == name or m.endswith(f".{name}") for m in sys.modules)
    row = report.row("code data.train")
    assert row.kind == "unknown"
    assert not row.changed
    assert "not loaded in this process" in row.note
    assert f"import {name}" in row.note
    assert any("import its module yourself" in text for text in report.limits)


# -- 2. a plan read from JSON holds text; validate() imports nothing ------------------------------
def _with_train_factory(base, ref: str) -> dict:
    data = base.to_json()
    data["data"]["train"]["factory"] = ref
    return data


def test_loading_and_inspecting_a_plan_imports_nothing(base, tmp_path, monkeypatch, forget_modules):
    code = tmp_path / "user_code"
    marker, pkg_marker = tmp_path / "module.txt", tmp_path / "package.txt"
    name = f"honest_{uuid.uuid4().hex[:8]}"
    _hostile_module(code, name, marker)
    package = code / f"pkg_{uuid.uuid4().hex[:8]}"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(pkg_marker)!r}, 'w').write('ran')\n")
    (package / "sub.py").write_text("def make():\n    return []\n")
    monkeypatch.syspath_prepend(str(code))
    data = _with_train_factory(base, f"{name}:make")
    data["callbacks"] = [{"factory": f"{package.name}.sub:make", "via": "with_callbacks"}]

    plan = ExperimentPlan.from_json(json.dumps(data))
    problems = plan.validate()
    plan.check("train.n_epochs", 3)
    plan.values()
    assert plan.to_json() == data
    str(plan.binding_report())
    str(drift_report(plan))
    repr(plan)
    assert problems.ok, problems
    assert not marker.exists()
    assert not pkg_marker.exists()  # not even a parent package runs to find a child

    resolved = plan.resolve()  # the explicit step: now their code runs
    assert marker.read_text() == "imported"
    assert pkg_marker.exists()
    assert resolved._data[0].obj is sys.modules[name].make
    assert resolved.resolve() is resolved


@pytest.mark.parametrize(
    ("field", "ref", "says"),
    [
        ("data.train", "os:abort", "standard library"),
        ("data.train", "posix:abort", "standard library"),
        ("data.train", "subprocess:Popen", "standard library"),
        ("data.train", "shutil:rmtree", "standard library"),
        ("data.train", "importlib:import_module", "standard library"),
        ("data.train", "sys:exit", "standard library"),
        ("model.loss", "builtins:exec", "standard library"),
        ("callbacks[0]", "__main__:x", "__main__"),
        ("data.train", "plan_factories:_tensors", "private name"),
        ("data.train", "_posixsubprocess:fork_exec", "standard library"),
        ("data.train", "plan_factories:EpochCounter.on_epoch_ended", "top level"),
        ("train.extra_metrics", "os:system", "standard library"),
    ],
)
def test_a_reference_to_code_no_plan_writes_is_refused_before_anything_runs(
    base, runs_root, field, ref, says
):
    data = base.to_json()
    if field == "data.train":
        data["data"]["train"]["factory"] = ref
    elif field == "model.loss":
        data["values"]["model.loss"] = {"ref": ref}
    elif field == "train.extra_metrics":
        data["values"]["train.extra_metrics"] = {"refs": {"rows": ref}}
    else:
        data["callbacks"] = [{"factory": ref, "via": "with_callbacks"}]
    plan = ExperimentPlan.from_json(data)  # loading is inspect-only: it passes
    problem = plan.validate().get(field)
    assert problem is not None, plan.validate()
    assert says in problem.fix
    assert problem.value == ref
    for step in (plan.resolve, plan.fit, plan.materialize, plan.expected_run_id):
        with pytest.raises(PlanError) as raised:
            step()
        assert field in raised.value.problems.fields
    assert not runs_root.exists() or not any(runs_root.iterdir())  # no run was made


def test_os_abort_never_reaches_the_interpreter(base, tmp_path):
    """The reported attack, in a process of its own: the plan passed validate() and
    fit() called os.abort()."""
    data = json.dumps(_with_train_factory(base, "os:abort"))
    script = textwrap.dedent(
        f"""
        import json, sys
        from nnx_lab import ExperimentPlan
        from nnx_lab.plans import PlanError
        plan = ExperimentPlan.from_json({data!r})
        assert not plan.validate().ok
        for step in (plan.fit, plan.resolve, plan.lr_finder, plan.materialize):
            try:
                step()
            except PlanError as exc:
                assert "standard library" in str(exc)
            else:
                sys.exit("not refused")
        print("alive")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests/python")])},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "alive"


def test_a_module_inside_a_runs_root_or_a_run_folder_is_refused(
    base, runs_root, tmp_path, monkeypatch, forget_modules
):
    marker = tmp_path / "ran.txt"
    in_root = f"hostile_{uuid.uuid4().hex[:8]}"
    _hostile_module(runs_root, in_root, marker)
    run_folder = tmp_path / "shared" / ("ab" * 16)  # a run folder, wherever it sits
    in_run = f"hostile_{uuid.uuid4().hex[:8]}"
    _hostile_module(run_folder, in_run, marker)
    monkeypatch.syspath_prepend(str(runs_root))
    monkeypatch.syspath_prepend(str(run_folder))
    for name, says in ((in_root, "inside the runs root"), (in_run, "inside the run folder")):
        plan = ExperimentPlan.from_json(_with_train_factory(base, f"{name}:make"))
        assert says in plan.validate().get("data.train").fix
        with pytest.raises(PlanError, match=says):
            plan.resolve()
        with pytest.raises(PlanError, match=says):
            plan.fit()
    # the default runs root (./runs) and NNX_RUNS_ROOT are runs roots too
    monkeypatch.setenv("NNX_RUNS_ROOT", str(runs_root))
    plan = ExperimentPlan.from_json(
        _with_train_factory(base.with_runs_root(None), f"{in_root}:make")
    )
    assert "inside the runs root" in plan.validate().get("data.train").fix
    assert not marker.exists()


def test_one_refused_reference_keeps_every_other_module_from_running(
    base, tmp_path, monkeypatch, forget_modules
):
    marker = tmp_path / "honest.txt"
    name = f"honest_{uuid.uuid4().hex[:8]}"
    _hostile_module(tmp_path / "code", name, marker)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    data = _with_train_factory(base, f"{name}:make")
    data["callbacks"] = [{"factory": "os:abort", "via": "with_callbacks"}]
    plan = ExperimentPlan.from_json(data)
    with pytest.raises(PlanError) as raised:
        plan.resolve()
    assert raised.value.problems.fields == ("callbacks[0]",)
    assert not marker.exists()


def test_a_name_imported_into_a_module_is_named_where_it_is_defined(base):
    plan = ExperimentPlan.from_json(_with_train_factory(base, "plan_factories:DataLoader"))
    with pytest.raises(PlanError, match="name it where it is defined"):
        plan.resolve()
    missing = ExperimentPlan.from_json(_with_train_factory(base, "plan_factories:nothing_here"))
    assert "has no 'nothing_here'" in missing.validate().get("data.train").fix


def test_an_honest_plan_round_trips_and_fits_from_its_json_text(base):
    text = json.dumps(base.with_loss(pf.smooth_loss).to_json())
    plan = ExperimentPlan.from_json(text.encode())
    assert str(plan.value("model.loss")) == "plan_factories:smooth_loss"
    assert plan.expected_run_id() == base.with_loss(pf.smooth_loss).expected_run_id()
    manifest = ExperimentManifest.for_plan(plan)  # the code's identity, by its references
    assert manifest == ExperimentManifest.for_plan(base.with_loss(pf.smooth_loss))
    result = plan.fit(provenance=manifest)  # fit() resolves first
    assert result.run.status.value == "finished"
    assert not drift_report(plan.resolve()).drifted


# -- 3. one strict shape ------------------------------------------------------------------------
def _deep(depth: int) -> dict:
    node: dict = {}
    top = node
    for _ in range(depth):
        node["x"] = {}
        node = node["x"]
    return top


def _hostile_documents(base) -> list[tuple[str, object, str]]:
    good = base.to_json()

    def edit(fn):
        doc = copy.deepcopy(good)
        fn(doc)
        return doc

    return [
        ("format", {"values": {}}, "format"),
        ("format", [1, 2], "format"),
        ("", edit(lambda d: d.update(extra=1)), "unknown field"),
        ("", edit(lambda d: d["values"].update({"train.n_epochs": _deep(10**5)})), "nested"),
        ("", "[" * 100_000 + "]" * 100_000, "nested"),
        ("values['train.n_epochs']", edit(lambda d: d["values"].update({"train.n_epochs": "abc"})),
         "int"),
        ("values['train.n_epochs']", edit(lambda d: d["values"].update({"train.n_epochs": True})),
         "int"),
        ("values['train.n_epoch']", edit(lambda d: d["values"].update({"train.n_epoch": 3})),
         "no plan field"),
        ("values['net.hidden_dims']", edit(lambda d: d["values"].update({"net.hidden_dims": "ab"})),
         "array"),
        ("values['train.optim.max_lr']",
         json.dumps(good).replace('"train.optim.max_lr": 0.01', '"train.optim.max_lr": NaN'),
         "finite"),
        ("values['train.seed']", json.dumps(good).replace('"train.seed": 7', '"train.seed": 1e400'),
         "finite"),
        ("", json.dumps(good).replace('"train.seed": 7', '"train.seed": ' + "9" * 5000), "JSON"),
        ("values['net.hidden_dims']",
         edit(lambda d: d["values"].update({"net.hidden_dims": [1] * 10**6})), "list"),
        ("callbacks", edit(lambda d: d.update(callbacks="abc")), "array"),
        ("data.train.factory", edit(lambda d: d["data"]["train"].update(factory=5)), "str"),
        ("data.train.factory", edit(lambda d: d["data"]["train"].update(factory="os:abort()")),
         "regex"),
        ("data.train", edit(lambda d: d["data"]["train"].update(code="x")), "unknown field"),
        ("values['model.loss'].ref", edit(lambda d: d["values"].update({"model.loss": {"ref": 1}})),
         "str"),
        ("values['model.loss']",
         edit(lambda d: d["values"].update({"model.loss": {"ref": "a:b", "run": 1}})), "unknown"),
        ("sources['train.n_epochs']",
         edit(lambda d: (d["values"].pop("train.n_epochs"), d["sources"].update(
             {"train.n_epochs": "with_epochs"}))), "do not set"),
        ("values['train.runs_root']",
         edit(lambda d: d["values"].update({"train.runs_root": object()})), "JSON cannot hold"),
    ]  # fmt: skip


def test_a_plan_json_passes_one_strict_shape_first(base):
    for field, doc, says in _hostile_documents(base):
        with pytest.raises(PlanSchemaError) as raised:
            ExperimentPlan.from_json(doc)  # type: ignore[arg-type]
        exc = raised.value
        assert isinstance(exc, ConfigError)
        assert isinstance(exc, SchemaError)
        assert exc.field == field or exc.field.startswith(field), (field, str(exc))
        assert says in str(exc), (says, str(exc))
        assert str(exc).startswith("plan JSON: ")
        assert exc.fix


def test_a_plan_file_is_named_in_its_errors(base, tmp_path):
    file = tmp_path / "course_plan.json"
    doc = base.to_json()
    doc["values"]["train.n_epochs"] = "abc"
    file.write_text(json.dumps(doc))
    with pytest.raises(PlanSchemaError) as raised:
        ExperimentPlan.from_json(file.read_bytes(), source=file)
    assert str(raised.value).startswith(f"{file}: values['train.n_epochs']")
    assert raised.value.value == "abc"


def test_a_runs_plan_json_passes_its_shape_before_a_report_reads_it(base, runs_root):
    result = base.fit()
    folder = result.run.run_dir
    good = json.loads((folder / "plan.json").read_text())

    def write(doc):
        (folder / "plan.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))

    hostile = [
        ("not json {", ""),
        ("[" * 100_000 + "]" * 100_000, ""),
        ({**good, "extra": 1}, ""),
        ({**good, "record": {**good["record"], "code": "abc"}}, "record.code"),
        ({**good, "record": {**good["record"], "code": [{"role": "x", "digest": 5}]}},
         "record.code[0].digest"),
        ({**good, "run_id": "../../etc"}, "run_id"),
        ({**good, "plan": {**good["plan"], "callbacks": [{"factory": "a b"}]}},
         "plan.callbacks[0]"),
        ({**good, "plan": {**good["plan"], "values": {"x": float("nan")}}}, "plan.values.x"),
    ]  # fmt: skip
    for doc, field in hostile:
        write(doc)
        for read in (
            lambda: run_record(result.run.id, runs_root),
            lambda: drift_report(result.run.id, runs_root=runs_root),
        ):
            with pytest.raises(SchemaError) as raised:
                read()
            assert raised.value.path == folder / "plan.json"
            assert raised.value.field.startswith(field), (field, str(raised.value))
    write(good)
    assert not drift_report(result.run.id, runs_root=runs_root).drifted
    (folder / "plan.json").unlink()
    (folder / "plan.json").symlink_to(folder / "run.yaml")
    with pytest.raises(SchemaError, match="is a link"):
        run_record(result.run.id, runs_root)


def test_a_loaded_plan_compares_by_its_references_until_resolved(base):
    loaded = ExperimentPlan.from_json(base.to_json())
    report = drift_report(loaded, base)
    row = report.row("code data.train")
    assert row.kind == "unknown"
    assert not row.changed
    assert "plan.resolve()" in row.note
    assert not drift_report(loaded.resolve(), base).drifted
