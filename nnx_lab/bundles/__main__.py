"""``python -m nnx_lab.bundles export RUN_ID PATH --runs-root ROOT [--checkpoint last|best]
[--archive]``: ``export_bundle`` from a command line.

The JupyterLab runs panel's "Export bundle" runs this in a subprocess: the server
extension is torch-free, and an export loads the checkpoint (its checksums, its recipe)
with torch. Exit status 0: written; 2: refused (the one-line reason on stderr, as the
``ConfigError``/``NNxError`` says it); 1: an unexpected failure (its traceback).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import NNxError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnx_lab.bundles")
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="write a run's checkpoint as a bundle")
    export.add_argument("run_id")
    export.add_argument("path", help="the folder (or, with --archive, the zip file) to write")
    export.add_argument("--runs-root", required=True)
    export.add_argument("--checkpoint", default="last", choices=("last", "best"))
    export.add_argument("--archive", action="store_true", help="one zip file")
    export.add_argument(
        "--no-record",
        action="store_true",
        help="write nothing in the run folder (no bundles.json entry)",
    )
    args = parser.parse_args(argv)
    from ._export import export_bundle  # after the arguments: --help needs no torch

    try:
        path = export_bundle(
            args.run_id,
            args.path,
            checkpoint=args.checkpoint,
            archive=args.archive,
            runs_root=args.runs_root,
            record=not args.no_record,
        )
    except (NNxError, FileNotFoundError, ValueError) as exc:  # a refusal: its reason
        print(str(exc).splitlines()[0][:1000] if str(exc) else type(exc).__name__, file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
