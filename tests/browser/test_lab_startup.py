"""JupyterLab starts quietly from an environment inside the checkout: the repository's
package.json must not put that environment's JupyterLab tooling (jlpm, yarn) into the ES
module scope, which made every start print a screen of minified JavaScript ending in
"Fail to get yarn configuration ... Dynamic require of "util" is not supported"."""

from __future__ import annotations

import json

from lab_harness import REPO


def test_the_server_starts_without_yarn_errors(jupyter_server, new_lab):
    new_lab()  # the page has loaded: the server has done its start-up build checks
    log = jupyter_server.log.read_text(errors="replace")
    assert "Fail to get yarn configuration" not in log
    assert "Dynamic require of" not in log


def test_the_repository_package_is_not_an_es_module_scope():
    # an environment made inside the checkout (.venv, .venv-test) inherits the nearest
    # package.json's "type"; JupyterLab's bundled yarn is CommonJS
    assert json.loads((REPO / "package.json").read_text()).get("type", "commonjs") == "commonjs"
