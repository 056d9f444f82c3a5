r"""``--what featurize``: feature-map speed, structured (FWHT) against dense projections.

Each contender maps the same :math:`N\times d` inputs to :math:`F` real features, timed in the same run
(``torch.no_grad()``, the whole forward pass including :math:`\cos`/:math:`\sin` or products):

* ``sorf-fwht``: :class:`~gprf.features.RandomFourierFeatures` with ``sampler="structured"`` -- blocks
  :math:`\tilde H D_1\tilde H D_2\tilde H D_3` applied by the fast Walsh–Hadamard transform,
  :math:`O(Fd^{-1}\cdot d\log d)` per input instead of :math:`O(Fd)`;
* ``orf-dense``: the same map with ``sampler="orthogonal"`` (a dense :math:`d\times F/2` projection);
* ``rff-dense``: ``sampler="iid"`` (dense Gaussian projection);
* ``sklearn-rbf``: scikit-learn's ``RBFSampler(n_components=F)`` (:math:`\sqrt{2/F}\cos(Wx + b)`, :math:`F`
  frequencies where gprf projects on :math:`F/2` and takes :math:`[\cos, \sin]`); NumPy on the CPU;
* ``srht-fwht``: :class:`~gprf.features.PolynomialSketch` ``sketch="srht"`` (TensorSRHT, FWHT);
* ``gaussian-sketch``: ``sketch="gaussian"`` (dense Gaussian projections);
* ``tensorsketch``: ``sketch="tensorsketch"`` (count sketches and FFTs);
* ``sklearn-countsketch``: scikit-learn's ``PolynomialCountSketch`` (TensorSketch), NumPy on the CPU.

scikit-learn runs only when the benchmark runs on the CPU (a GPU time against a NumPy time is no ratio).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import numpy as np
import torch
from sklearn.kernel_approximation import PolynomialCountSketch, RBFSampler

from benchmarks.timing import interleaved_timings
from gprf.cli.report import Progress, format_seconds, format_table
from gprf.features import FeatureMap, PolynomialSketch, RandomFourierFeatures

#: Ratios reported (numerator, denominator): each structured map against its dense or scikit-learn peer.
RATIOS = (
    ("sorf-fwht", "orf-dense"),
    ("rff-dense", "sklearn-rbf"),
    ("sorf-fwht", "sklearn-rbf"),
    ("srht-fwht", "gaussian-sketch"),
    ("tensorsketch", "sklearn-countsketch"),
)


def gprf_maps(d: int, f: int, degree: int, seed: int) -> dict[str, FeatureMap]:
    """The gprf contenders (float64 draws; moved to the benchmark's device and dtype by the caller)."""
    return {
        "sorf-fwht": RandomFourierFeatures(d, f, sampler="structured", seed=seed),
        "orf-dense": RandomFourierFeatures(d, f, sampler="orthogonal", seed=seed),
        "rff-dense": RandomFourierFeatures(d, f, sampler="iid", seed=seed),
        "srht-fwht": PolynomialSketch(d, f, degree, sketch="srht", seed=seed),
        "gaussian-sketch": PolynomialSketch(d, f, degree, sketch="gaussian", seed=seed),
        "tensorsketch": PolynomialSketch(d, f, degree, sketch="tensorsketch", seed=seed),
    }


def sklearn_maps(x: np.ndarray, f: int, degree: int, seed: int) -> dict[str, Callable[[], np.ndarray]]:
    """scikit-learn's samplers fitted to ``x`` (``fit`` only draws the projections); ``transform`` is timed."""
    rbf = RBFSampler(gamma=0.5, n_components=f, random_state=seed).fit(x)  # gamma 1/2: unit-lengthscale RBF
    count = PolynomialCountSketch(degree=degree, gamma=1.0, coef0=0.0, n_components=f, random_state=seed).fit(x)
    return {"sklearn-rbf": lambda: rbf.transform(x), "sklearn-countsketch": lambda: count.transform(x)}


def featurize_fns(
    n: int, d: int, f: int, degree: int, seed: int, device: torch.device, dtype: torch.dtype
) -> dict[str, Callable[[], object]]:
    """Zero-argument callables, one per contender, mapping the same ``n x d`` inputs."""
    generator = torch.Generator().manual_seed(seed)
    x64 = torch.randn(n, d, generator=generator, dtype=torch.float64) / d**0.5  # unit-scale inner products
    x = x64.to(device, dtype)
    fns: dict[str, Callable[[], object]] = {}
    for name, feature_map in gprf_maps(d, f, degree, seed).items():
        fns[name] = functools.partial(feature_map.to(device, dtype), x)
    if device.type == "cpu":
        fns.update(sklearn_maps(x64.to(dtype).numpy(), f, degree, seed))
    return fns


def run_featurize(
    n: int,
    dims: list[int],
    f: int,
    degree: int,
    seed: int,
    device: torch.device,
    dtype: torch.dtype,
    repeats: int,
    warmup: int,
    log: Progress,
) -> dict:
    """Median seconds per contender and input dimension, and the :data:`RATIOS`."""
    medians: dict[str, dict[str, float]] = {}
    for d in dims:
        fns = featurize_fns(n, d, f, degree, seed, device, dtype)
        log(f"featurize d={d}: {warmup} warm-up + {repeats} timed run(s) of {', '.join(fns)}")
        with torch.no_grad():
            times = interleaved_timings(fns, device, repeats, warmup)
        medians[str(d)] = {name: statistics.median(values) for name, values in times.items()}
    ratios = {
        f"{a}/{b}": {d: per[a] / per[b] for d, per in medians.items() if a in per and b in per} for a, b in RATIOS
    }
    return {
        "n": n,
        "dims": dims,
        "features": f,
        "sketch_degree": degree,
        "median_s": medians,
        "ratios": {name: values for name, values in ratios.items() if values},
    }


def render_featurize(result: dict) -> list[str]:
    dims = [str(d) for d in result["dims"]]
    medians = result["median_s"]
    names = list(dict.fromkeys(name for per in medians.values() for name in per))
    headers = ["featurize", *(f"d={d}" for d in dims)]
    rows = [[name, *(format_seconds(medians[d].get(name)) for d in dims)] for name in names]
    rows += [
        [ratio, *(f"{values[d]:.3g}" if d in values else "-" for d in dims)]
        for ratio, values in result["ratios"].items()
    ]
    lines = [
        f"featurize: N={result['n']} inputs to F={result['features']} real features (sketches: degree "
        f"{result['sketch_degree']}), median seconds, then ratios (< 1: the first is faster)",
        "",
        format_table(headers, rows),
    ]
    if not any(name.startswith("sklearn") for name in names):
        lines.append("scikit-learn samplers skipped: they run on the CPU only")
    return lines
