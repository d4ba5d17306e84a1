"""The shapes of the files the package reads, one module per kind of file (each a set
of ``msgspec.Struct``s checked through ``nnx_lab/runs/_schema.py``)."""
