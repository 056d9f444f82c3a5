r"""``--what thompson``: pathwise Thompson sampling, gprf against BoTorch's default route.

Discrete Thompson sampling of ``S`` candidates (default 100): draw ``S`` posterior sample paths with BoTorch's
``draw_matheron_paths`` (what ``PathwiseThompsonSampling`` draws), evaluate every path on the same ``C``
candidate points and keep each path's maximiser. Two routes, same data, hyperparameters at BoTorch's
initial values (fitting is what ``--what mll`` times):

* gprf: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` -- prior paths from the kernel's own ``F``
  features and the update drawn in weight space (:func:`~gprf.botorch.weight_space_matheron_paths`: the prior paths
  are never evaluated at the training inputs), :math:`O(NF^2 + F^3 + SF^2)` time and
  :math:`O(\min(N, \text{chunk})F + F^2 + SF)` memory for the paths, plus the ``S x C`` candidate values;
* BoTorch: an exact ``SingleTaskGP`` -- BoTorch's default prior features and Gaussian update, a dense
  :math:`N\times N` Cholesky factor that ``torch.cholesky_solve`` broadcasts over the ``S`` samples:
  :math:`(S + 2)N^2` floats (:func:`dense_update_bytes`), so it runs only at a smaller ``N``.

gprf runs at both sizes (the ratio compares the routes at the small ``N``); the report states what the
dense update would need at the large ``N``. Memory measured per route, in one untimed call: the peak allocated
GPU memory on CUDA; on the CPU the process's peak resident set size (memory already held included), reset
before each route where Linux allows it, otherwise the peak so far; and the peak above what was held before the call
("extra": allocated GPU memory on CUDA; on the CPU the peak tensor memory of a second call from torch's profiler).
"""

from __future__ import annotations

import functools
import statistics
import warnings

import torch
from torch import Tensor

from benchmarks.bench_gp import synthetic_data
from benchmarks.memory import available_memory_bytes, peak_extra_tensor_bytes, probe_memory
from benchmarks.timing import interleaved_timings
from gprf.cli.options import CLIError
from gprf.cli.report import Progress, format_seconds, format_table

ROUTES = {
    "gprf-large": "gprf RandomFeatureSingleTaskGP, large N",
    "gprf-small": "gprf RandomFeatureSingleTaskGP, small N",
    "botorch-small": "BoTorch exact SingleTaskGP, small N",
}


def dense_update_bytes(num_train: int, num_paths: int, itemsize: int = 8) -> int:
    """Bytes of BoTorch's dense pathwise update: :math:`K + \\Sigma` and its Cholesky factor (:math:`N^2`
    each) and the factor broadcast over the ``num_paths`` samples by ``torch.cholesky_solve``."""
    return (num_paths + 2) * num_train**2 * itemsize


def thompson_candidates(model: torch.nn.Module, num_paths: int, candidates: Tensor) -> Tensor:
    """Discrete Thompson sampling: each of ``num_paths`` posterior paths' maximiser among ``candidates``."""
    from botorch.sampling.pathwise import draw_matheron_paths

    model.eval()
    with torch.no_grad():
        paths = draw_matheron_paths(model, sample_shape=torch.Size([num_paths]))
        values = paths(candidates)  # S x C
        return candidates[values.argmax(dim=-1)]


def check_dense_update_fits(num_train: int, num_paths: int, itemsize: int, device: torch.device) -> None:
    """A clear error, before the run, where BoTorch's dense update cannot fit (instead of an OOM kill)."""
    need, free = dense_update_bytes(num_train, num_paths, itemsize), available_memory_bytes(device)
    if need > free:
        raise CLIError(
            f"argument --thompson-exact-n: BoTorch's dense update at N={num_train} with {num_paths} paths needs "
            f"{need / 2**30:.3g} GiB, {free / 2**30:.3g} GiB are free on {device}; lower --thompson-exact-n "
            "(0 skips the exact route) or --paths"
        )


def _require_botorch() -> None:
    try:
        import botorch  # noqa: F401
    except ImportError:
        raise CLIError("--what thompson needs BoTorch: pip install 'gprf[botorch]'") from None


def _build_models(args, x: Tensor, y: Tensor) -> dict[str, torch.nn.Module]:
    from botorch.models import SingleTaskGP

    from gprf.botorch import RandomFeatureSingleTaskGP

    large, small = args.thompson_n, args.thompson_exact_n

    def gprf_model(n: int) -> torch.nn.Module:
        return RandomFeatureSingleTaskGP(x[:n], y[:n], num_features=args.features, seed=args.seed)

    models = {"gprf-large": gprf_model(large)}
    if small > 0:
        models["gprf-small"] = gprf_model(small)
        models["botorch-small"] = SingleTaskGP(x[:small], y[:small])
    return {name: model.to(x) for name, model in models.items()}


def run_thompson(args, device: torch.device, dtype: torch.dtype, log: Progress) -> dict:
    """Median seconds and peak memory of each route in :data:`ROUTES` (the small ones when ``N_small > 0``)."""
    _require_botorch()
    from botorch.exceptions import InputDataWarning

    large, small, num_paths = args.thompson_n, args.thompson_exact_n, args.paths
    itemsize = torch.empty((), dtype=dtype).element_size()
    check_dense_update_fits(small, num_paths, itemsize, device)
    x, y, candidates = synthetic_data(max(large, small), args.d, args.candidates, args.seed, device, dtype)
    # BoTorch models expect inputs in the unit cube: the normal CDF maps N(0, 1) coordinates there.
    x, candidates, y = torch.special.ndtr(x), torch.special.ndtr(candidates), y.unsqueeze(-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)  # float32 runs: BoTorch recommends float64
        models = _build_models(args, x, y)
        fns = {
            name: functools.partial(thompson_candidates, model, num_paths, candidates) for name, model in models.items()
        }
        peaks, extras, per_route = {}, {}, True
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(args.seed)  # the paths' prior weights and noise come from the global RNG
            try:
                for name, fn in fns.items():  # one untimed call per route, alone, for its peak memory
                    log(f"thompson {ROUTES[name]}: memory probe")
                    probe = probe_memory(fn, device)
                    peaks[name], extras[name] = probe.peak, probe.extra
                    per_route &= probe.windowed
                    if device.type == "cpu":  # the tensors' own peak: RSS adds the allocator's noisy slack
                        extras[name] = peak_extra_tensor_bytes(fn)
                log(f"thompson: {args.warmup} warm-up + {args.repeats} timed run(s) of {', '.join(fns)}")
                times = interleaved_timings(fns, device, args.repeats, args.warmup)
            except torch.cuda.OutOfMemoryError:
                raise CLIError(
                    f"out of GPU memory in the Thompson-sampling benchmark; lower --thompson-exact-n ({small}) "
                    f"or --thompson-n ({large})"
                ) from None
    medians = {name: statistics.median(values) for name, values in times.items()}
    result = {
        "paths": num_paths,
        "candidates": args.candidates,
        "features": args.features,
        "large_n": large,
        "small_n": small,
        "median_s": medians,
        "peak_memory_bytes": peaks,
        "peak_extra_memory_bytes": extras,
        "peak_memory_kind": _memory_kind(device, per_route),
        "dense_update_bytes": {"large_n": dense_update_bytes(large, num_paths, itemsize)},
    }
    if small > 0:
        result["dense_update_bytes"]["small_n"] = dense_update_bytes(small, num_paths, itemsize)
        result["ratio_gprf/botorch_small"] = medians["gprf-small"] / medians["botorch-small"]
    return result


def _memory_kind(device: torch.device, per_route: bool) -> str:
    if device.type == "cuda":
        return "GPU max allocated per route"
    return "process peak RSS per route" if per_route else "process peak RSS so far"


def render_thompson(result: dict) -> list[str]:
    medians, peaks, extras = result["median_s"], result["peak_memory_bytes"], result["peak_extra_memory_bytes"]
    sizes = {"gprf-large": result["large_n"], "gprf-small": result["small_n"], "botorch-small": result["small_n"]}

    def gib(value: int | None) -> str:
        return "-" if value is None else f"{value / 2**30:.3g}"

    rows = [
        [name, str(sizes[name]), format_seconds(medians[name]), gib(peaks[name]), gib(extras[name])] for name in medians
    ]
    dense = result["dense_update_bytes"]
    lines = [
        f"thompson: discrete pathwise Thompson sampling, {result['paths']} paths (one candidate each) "
        f"maximised over {result['candidates']} points; gprf F={result['features']} features; "
        "median seconds (paths + evaluation + argmax)",
        "",
        format_table(["route", "N", "seconds", f"peak GiB ({result['peak_memory_kind']})", "extra GiB"], rows),
        "extra: on CUDA the peak allocated above what was held before the route's call; on the CPU the peak tensor "
        "memory of a second call from torch's profiler (an upper bound: inputs it uses count too)",
        "",
        f"BoTorch's dense update at the large N={result['large_n']} would need "
        f">= {dense['large_n'] / 2**30:.3g} GiB ((S + 2) N^2 floats, S={result['paths']})",
    ]
    if "small_n" in dense:
        lines.append(
            f"at the small N={result['small_n']}: dense update {dense['small_n'] / 2**30:.3g} GiB; "
            f"ratio gprf/botorch {result['ratio_gprf/botorch_small']:.3g} (< 1: gprf is faster)"
        )
    return lines
