"""The JupyterLab extension as shipped: a prebuilt labextension built from js/lab, and
the server extension's switch, both inside the wheel as shared data, so that after
`pip install` of the wheel JupyterLab lists the extension enabled and the server loads
nnx_lab.server with no other step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import nnx_lab

ROOT = Path(__file__).resolve().parents[3]
BUILT = ROOT / "nnx_lab" / "labextension"
DATA = f"nnx_lab-{nnx_lab.__version__}.data/data/"


def test_the_labextension_is_built_from_js_lab_against_jupyterlabs_shared_packages():
    meta = json.loads((BUILT / "package.json").read_text())
    source = json.loads((ROOT / "js" / "lab" / "package.json").read_text())
    assert meta["name"] == source["name"] == "nnx-lab"
    assert meta["version"] == source["version"] == nnx_lab.__version__
    entry = BUILT / meta["jupyterlab"]["_build"]["load"]
    assert entry.is_file(), "run `npm run build` (or `pip install -e .`)"
    assert meta["jupyterlab"]["_build"]["extension"] == "./extension"
    code = "".join(p.read_text() for p in (BUILT / "static").glob("*.js"))
    # JupyterLab's own packages are consumed from the page, never bundled
    assert "@jupyterlab/application" in code
    assert "class LabShell" not in code
    # the chart and series code is the widget bundle's own (one code base)
    assert "nnx-lab: column" in code  # js/shared/store.js
    assert "nnx-steps-" in code  # js/monitor/view.js
    assert "uplot" in code


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # The front end is built already (the tests run on it): the wheel packs it.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        env={**os.environ, "SKIP_JUPYTER_BUILDER": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
    )
    (path,) = out.glob("nnx_lab-*.whl")
    return path


def test_the_wheel_ships_the_labextension_and_enables_the_server_extension(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    lab = DATA + "share/jupyter/labextensions/nnx-lab/"
    assert lab + "package.json" in names
    assert lab + "install.json" in names
    shipped = {n[len(lab) :] for n in names if n.startswith(lab + "static/")}
    built = {f"static/{p.name}" for p in (BUILT / "static").iterdir()}
    assert shipped == built
    config = DATA + "etc/jupyter/jupyter_server_config.d/nnx_lab.json"
    assert json.loads(zipfile.ZipFile(wheel).read(config)) == {
        "ServerApp": {"jpserver_extensions": {"nnx_lab.server": True}}
    }
    assert "nnx_lab/server/__init__.py" in names
    assert not any(n.startswith("nnx_lab/labextension/") for n in names)  # once, as data


def _own_install():
    """This environment's nnx-lab: its metadata and its installed labextension."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("nnx-lab")
    except PackageNotFoundError:
        return None
    lab = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "nnx-lab"
    return (dist.version, lab.exists())


def test_installed_from_the_wheel_jupyter_lists_both_extensions_enabled(wheel, tmp_path):
    before = _own_install()
    prefix = tmp_path / "prefix"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--ignore-installed",  # never touch this environment's own nnx-lab
            "--prefix",
            str(prefix),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    assert _own_install() == before  # the prefix install left this environment alone
    site = next(prefix.glob("lib/python*/site-packages"))
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tmp_path,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    section = text.split(str(prefix / "share" / "jupyter" / "labextensions"), 1)[1]
    line = next(x for x in section.splitlines() if "nnx-lab" in x)
    assert re.search(
        rf"nnx-lab v{re.escape(nnx_lab.__version__)} enabled\s+OK \(python, nnx-lab\)", line
    )
    # the server reads the wheel's switch from its config path: nnx_lab.server is on
    check = (
        "from jupyter_server.extension.config import ExtensionConfigManager\n"
        "from jupyter_server.extension.manager import ExtensionPackage\n"
        "import nnx_lab, sys\n"
        f"m = ExtensionConfigManager(read_config_path=[{str(prefix / 'etc' / 'jupyter')!r}])\n"
        "print(m.get_jpserver_extensions())\n"
        "pkg = ExtensionPackage(name='nnx_lab.server', enabled=True)\n"
        "print(pkg.validate(), nnx_lab.__file__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", check],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tmp_path,
    )
    first, second = out.stdout.splitlines()
    assert first == "{'nnx_lab.server': True}"
    assert second.startswith("True " + str(site))
