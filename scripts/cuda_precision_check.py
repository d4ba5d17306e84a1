"""Run the precision reference fixtures on the CUDA cells (fp32, fp16, bf16).

CI has no GPU, so these cells are not part of the pytest suite; run this on a CUDA host:

    python scripts/cuda_precision_check.py

It uses the same fixture as tests/python/engine/test_precision_reference.py (a seeded model
trained under the policy against a float64 loop, within REFERENCE_TOLERANCES) and prints
one line per cell. Exit status 1 if any supported cell fails.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "python")]


def main() -> int:
    import test_precision_reference as fixtures
    import torch

    import nnx_lab

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 1
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
        f"capability {torch.cuda.get_device_capability()}"
    )
    failed = 0
    for device, mode in fixtures.CUDA_CELLS:
        status = nnx_lab.precision_support()[device][mode]
        if status == "unsupported":
            print(f"{device} {mode}: unsupported on this GPU")
            continue
        try:
            with tempfile.TemporaryDirectory() as tmp:
                fixtures._check_cell(Path(tmp), device, mode, "adam")
        except AssertionError as exc:
            failed += 1
            print(f"{device} {mode}: FAILED {exc}")
        else:
            print(
                f"{device} {mode}: within {nnx_lab.precision.REFERENCE_TOLERANCES[(device, mode)]}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
