"""The shapes of the files the package reads, one module per family of files.

Each module declares its files' shapes as ``msgspec.Struct`` types, checked through the
one strict decoder (``nnx_lab/runs/_schema.py``): ``records`` holds ``run.yaml`` and
``metadata.yaml``, ``log`` a line of ``metrics.jsonl``, ``plan`` the plan JSON, and the
others the documents and artifacts beside them. The floors above reach them through
the names ``nnx_lab.runs`` exports; this package imports nothing itself, so each family
stays in its own module.
"""
