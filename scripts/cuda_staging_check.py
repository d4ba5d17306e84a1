"""Check the CUDA staging hook (issue 23) on a GPU host, and time it.

CI has no GPU, so the real hook is not part of the pytest suite (its logic is, with a
fake hook: tests/python/engine/test_staging.py). On a CUDA host:

    python scripts/cuda_staging_check.py

1. Batches through ``staged`` with the CUDA hook equal the loader's, moved to the
   device by hand, in order (several shuffled epochs, an uneven last batch).
2. A run trained on CUDA with staging gives the same weights, bit for bit, as the same
   run with the hook switched off (the loop then moves each batch itself).
3. The same run's training time with and without staging, alternating, median of 3.

Exit status 1 if 1 or 2 fails.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]


def _train(root: str, staging: bool, rows: int = 20_000, epochs: int = 2):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import nnx_lab.engine.evaluate as evaluate_module
    import nnx_lab.engine.loop as loop_module
    import nnx_lab.engine.streaming_eval as streaming_module
    from nnx_lab import Devices, NNModel, NNModelParams, NNParams, NNTrainParams
    from nnx_lab.engine.staging import device_hook

    hook = device_hook if staging else (lambda device: None)
    for module in (loop_module, evaluate_module, streaming_module):
        module.device_hook = hook
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(rows, 784, generator=g), torch.randint(0, 10, (rows,), generator=g)
    loader = DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)
    model = NNModel(
        net_params=NNParams(input_dim=784, output_dim=10, hidden_dims=[512, 512]),
        params=NNModelParams(device=Devices.CUDA),
    )
    params = NNTrainParams(
        n_epochs=epochs, seed=1, train_loader=loader, val_loader=loader, runs_root=root
    )
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.train(params)
    torch.cuda.synchronize()
    return model, time.perf_counter() - t0


def main() -> int:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from nnx_lab.engine.fast_batches import batches
    from nnx_lab.engine.staging import device_hook, staged

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 1
    ok = True
    device = torch.device("cuda")
    data = TensorDataset(torch.randn(1000, 16), torch.randint(0, 3, (1000,)))
    loader = DataLoader(data, batch_size=96, shuffle=True)
    for epoch in range(3):
        state = torch.get_rng_state()
        mine = [[t.cpu() for t in b] for b in staged(batches(loader), device_hook(device))]
        torch.set_rng_state(state)
        theirs = [[t.to(device).cpu() for t in b] for b in loader]
        pairs = zip(mine, theirs, strict=True) if len(mine) == len(theirs) else ()
        same = bool(pairs) and all(
            torch.equal(a, b) for ba, bb in pairs for a, b in zip(ba, bb, strict=True)
        )
        print(f"epoch {epoch}: staged batches equal the loader's: {same}")
        ok &= same
    with tempfile.TemporaryDirectory() as root:
        on, _ = _train(f"{root}/on", True)
        off, _ = _train(f"{root}/off", False)
        weights = zip(on.net.state_dict().values(), off.net.state_dict().values(), strict=True)
        equal = all(torch.equal(a, b) for a, b in weights)
        print(f"weights with and without staging bit-identical: {equal}")
        ok &= equal
        times: dict[bool, list[float]] = {True: [], False: []}
        for rep in range(3):
            for staging in (True, False):
                times[staging].append(_train(f"{root}/t{rep}{staging}", staging)[1])
        on_s, off_s = statistics.median(times[True]), statistics.median(times[False])
        print(f"train() seconds, median of 3: staged {on_s:.3f}, unstaged {off_s:.3f}")
        print(f"ratio unstaged / staged: {off_s / on_s:.3f} (> 1: staging is faster)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
