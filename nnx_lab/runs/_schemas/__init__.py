"""The shape of each file the package reads, one module per kind of file, each a
``msgspec.Struct`` that ``nnx_lab.runs._schema`` checks bytes against (``records``:
``run.yaml`` and ``metadata.yaml``; ``log``: a line of ``metrics.jsonl``). Import the
module you need; this package itself exports nothing."""
