"""Temperature fit on 100,000 x 100 logits: nnx_lab against netcal and a plain PyTorch
fit, in one process, on the same logits.

The logits are drawn at a known temperature (labels sampled from softmax(logits / T)),
so every method's temperature can be checked against the truth, not only timed.

- nnx_lab: ``fit_temperature`` (Newton on log T, float64).
- plain PyTorch: L-BFGS with a strong-Wolfe line search on log T, float64, from T = 1,
  the way a hand-written temperature fit usually looks.
- netcal ``TemperatureScaling`` (when it is installed: ``pip install netcal``). netcal
  takes probabilities, not logits, and its ``.temperature`` is 1 / T; it is given the
  float64 softmax of the logits and its temperature is inverted before comparing.

Like with like: every ECE is over 15 equal-width bins (netcal's default is 10), computed
by both nnx_lab's ECE and netcal's ``ECE(bins=15)`` on each method's calibrated
probabilities. Repetitions alternate the methods; times are medians, and the ratio is
each method's time over nnx_lab's.

    python benchmarks/calibration.py
    python benchmarks/calibration.py --rows 100000 --classes 100 --reps 5 --threads 1

On a shared machine whose cores are busy, one thread can beat two by a wide margin
(each parallel op waits for its slowest thread): say which you ran.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings


def make_logits(rows: int, classes: int, temperature: float, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    true = torch.randn(rows, classes, generator=g, dtype=torch.float64)
    y = torch.multinomial(torch.softmax(true, 1), 1, generator=g).squeeze(1)
    return (true * temperature).float(), y


def fit_nnx(logits, y):
    from nnx_lab import ProbabilitySpec, prediction_from_logits
    from nnx_lab.calibration import fit_temperature

    prediction = prediction_from_logits(logits, ProbabilitySpec("categorical"))
    t0 = time.perf_counter()
    fit = fit_temperature(
        prediction, y, model_id="bench", split_id="calibration", test_split_id="test"
    )
    seconds = time.perf_counter() - t0
    return seconds, fit.require().temperature, fit.iterations


def fit_torch(logits, y):
    import torch
    import torch.nn.functional as F

    z = logits.double()
    t0 = time.perf_counter()
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [log_t], lr=1.0, max_iter=100, tolerance_grad=1e-10, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    seconds = time.perf_counter() - t0
    return seconds, float(log_t.detach().exp()), opt.state[opt._params[0]]["n_iter"]


def fit_netcal(probabilities, y):
    from netcal.scaling import TemperatureScaling

    model = TemperatureScaling()
    t0 = time.perf_counter()
    model.fit(probabilities, y)
    seconds = time.perf_counter() - t0
    inverse = float(model.temperature[0])  # netcal's temperature is 1 / T
    return seconds, 1.0 / inverse, model


def ece_nnx(probabilities, y) -> float:
    import torch

    from nnx_lab import MetricSpec, StreamingMetrics

    metrics = StreamingMetrics([MetricSpec("ece", bins=15)], "categorical")
    metrics.update(y, probabilities=torch.as_tensor(probabilities, dtype=torch.float64))
    return metrics.finalize().values["ece"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=1.7)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's)"
    )
    args = parser.parse_args()

    import numpy as np
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)

    try:
        import netcal
        from netcal.metrics import ECE

        netcal_version = netcal.__version__
    except Exception as exc:  # not installed, or it does not import beside this torch
        netcal_version = None
        netcal_problem = f"{type(exc).__name__}: {exc}"

    logits, y = make_logits(args.rows, args.classes, args.temperature)
    y_np = y.numpy()
    probabilities = torch.softmax(logits.double(), 1).numpy()
    print(
        f"{args.rows:,} x {args.classes} logits drawn at T = {args.temperature}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads; netcal "
        f"{netcal_version or 'not available (' + netcal_problem + ')'}"
    )

    times: dict[str, list[float]] = {"nnx_lab": [], "torch L-BFGS": [], "netcal": []}
    found: dict[str, float] = {}
    iterations: dict[str, int] = {}
    netcal_model = None
    for _ in range(args.reps):
        s, t, it = fit_nnx(logits, y)
        times["nnx_lab"].append(s)
        found["nnx_lab"], iterations["nnx_lab"] = t, it
        s, t, it = fit_torch(logits, y)
        times["torch L-BFGS"].append(s)
        found["torch L-BFGS"], iterations["torch L-BFGS"] = t, it
        if netcal_version is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s, t, netcal_model = fit_netcal(probabilities, y_np)
            times["netcal"].append(s)
            found["netcal"] = t

    base = statistics.median(times["nnx_lab"])
    uncalibrated = {"nnx": ece_nnx(probabilities, y)}
    if netcal_version is not None:
        uncalibrated["netcal"] = float(ECE(bins=15).measure(probabilities, y_np))
    print(
        f"uncalibrated: ECE-15 {uncalibrated['nnx']:.5f} (nnx_lab)"
        + (f", {uncalibrated['netcal']:.5f} (netcal ECE)" if "netcal" in uncalibrated else "")
    )
    print(
        f"{'method':<14}{'median s':>10}{'ratio':>8}{'iters':>7}{'T found':>10}"
        f"{'T error':>9}{'ECE-15 nnx':>12}{'ECE-15 netcal':>15}"
    )
    for name, runs in times.items():
        if not runs:
            print(f"{name:<14}  not run: netcal is not available")
            continue
        temp = found[name]
        if name == "netcal":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibrated = np.asarray(netcal_model.transform(probabilities))
        else:
            calibrated = torch.softmax(logits.double() / temp, 1).numpy()
        e_nnx = ece_nnx(calibrated, y)
        e_net = math.nan
        if netcal_version is not None:
            e_net = float(ECE(bins=15).measure(calibrated, y_np))
        median = statistics.median(runs)
        print(
            f"{name:<14}{median:>10.3f}{median / base:>8.2f}{iterations.get(name, 0) or '-':>7}"
            f"{temp:>10.4f}{(temp / args.temperature - 1):>+9.2%}{e_nnx:>12.5f}{e_net:>15.5f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
