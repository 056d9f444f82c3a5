r"""The contenders of ``--what regression``, each trained on its own objective for a wall-clock budget.

Every model is ``ConstantMean`` + ``ScaleKernel(ARD RBF)`` or its approximation + ``GaussianLikelihood`` from
GPyTorch's initial hyperparameters, trained with Adam:

* ``exact``: the exact GP; ``ExactMarginalLogLikelihood`` by GPyTorch's default BBMM (conjugate gradients and
  stochastic Lanczos quadrature above 800 points; Gardner et al. 2018), predictive variances by LOVE
  (``fast_pred_var``; Pleiss et al. 2018);
* ``sgpr``: ``InducingPointKernel(ScaleKernel(RBF))`` with :math:`M` inducing points initialised at a seeded
  subset of the training inputs, trained on Titsias's collapsed bound (the marginal likelihood of the Nyström
  covariance minus :math:`\operatorname{tr}(K - Q)/(2\sigma^2)`; Titsias 2009);
* ``svgp``: ``VariationalStrategy`` with :math:`M` learned inducing points and a Cholesky variational
  distribution, ``VariationalELBO`` on minibatches (Hensman, Fusi & Lawrence 2013);
* ``rff``: GPyTorch's ``RFFKernel`` with ``num_samples = F/2`` frequencies, i.e. ``F`` real features
  :math:`[\cos, \sin]`, trained on the marginal likelihood through the Woodbury identity;
* ``gprf``: gprf's ``RandomFourierKernel(F, sampler="orthogonal")`` trained by :func:`gprf.fit_mll`;
* ``exact-start``: the exact GP started at lengthscale 1, outputscale 1 and noise 0.1 (:data:`SENSIBLE_START`), a
  start suited to standardised data, where GPyTorch's initial noise (0.69) is far too large;
* ``exact-warm``: the exact GP from the same start, tuned by Adam on a seeded subsample of :data:`WARM_ROWS` rows
  (Cholesky; at most :data:`WARM_STEPS` steps and :data:`WARM_SHARE` of the budget), then Adam on all rows (BBMM)
  for the rest of the budget;
* ``gprf-exact``: the exact GP with gprf's :class:`~gprf.kernels.PreconditionedKernel` (Nyström points or random
  features precondition its conjugate gradients) from the same start as ``exact-start``, trained by
  :func:`gprf.fit_mll`'s exact route with its defaults: exact steps on a seeded 2,000-row subsample (Cholesky), then
  preconditioned exact steps on all rows; predictive variances by its Rayleigh–Ritz cache
  (``fast_pred_var``). Its kernel matrix is kept whole (``block_rows`` = :math:`N`), as GPyTorch keeps the exact
  GP's;
* ``gprf-exact-surrogate``: the same with ``exact_start="surrogate"``: the random-feature recipe on the kernel's
  random-feature surrogate first, then the preconditioned exact steps.

The CG-based methods (the exact GPs above ``max_cholesky_size``) report the conjugate-gradient iterations of their
prediction's mean solve :math:`\hat K^{-1}(y - \mu)` at the trained hyperparameters, to GPyTorch's prediction
tolerance, under their own preconditioner (GPyTorch's rank-15 pivoted Cholesky, or the kernel's):
:func:`cg_iterations_per_solve`.

Test metrics are taken at checkpoints of the training clock (:func:`checkpoint_times`); the time they take is
not counted in it. Predictions at checkpoints are *cold*: caches cleared first, so conditioning on the training data
counts. The final prediction is the first after training: a model trained in training mode conditions there, while
``fit_mll`` has conditioned within its training clock (it hands its exact refit's factor to the model).

References: J. R. Gardner, G. Pleiss, D. Bindel, K. Q. Weinberger, A. G. Wilson. *GPyTorch: Blackbox
Matrix-Matrix Gaussian Process Inference with GPU Acceleration.* NeurIPS 2018. G. Pleiss, J. R. Gardner,
K. Q. Weinberger, A. G. Wilson. *Constant-Time Predictive Distributions for Gaussian Processes.* ICML 2018.
M. K. Titsias. *Variational Learning of Inducing Variables in Sparse Gaussian Processes.* AISTATS 2009.
J. Hensman, N. Fusi, N. D. Lawrence. *Gaussian Processes for Big Data.* UAI 2013.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable

import gpytorch
import torch
from gpytorch.kernels import InducingPointKernel, RBFKernel, RFFKernel, ScaleKernel
from torch import Tensor

import gprf
from benchmarks.cg_iterations import pivoted_cholesky_preconditioner
from gprf.cli.data import Split
from gprf.cli.models import RegressionGP
from gprf.cli.options import CLIError
from gprf.cli.timing import synchronize, timed
from gprf.kernels import PreconditionedKernel, RandomFourierKernel
from gprf.linalg import PreconditionedAddedDiagLinearOperator, cg_iterations
from gprf.metrics import mnll
from gprf.prediction.preconditioned import PREDICTION_TOLERANCE

#: ``--methods`` names, in report order.
METHODS = ("exact", "exact-start", "exact-warm", "sgpr", "svgp", "rff", "gprf", "gprf-exact", "gprf-exact-surrogate")
#: The exact GPs (their best is what the gprf routes are measured against) and the gprf routes.
EXACT_METHODS = ("exact", "exact-start", "exact-warm")
GPRF_METHODS = ("gprf", "gprf-exact", "gprf-exact-surrogate")
#: ``fit_mll``'s ``exact_start`` of the preconditioned exact routes.
EXACT_ROUTE_STARTS = {"gprf-exact": "subsample", "gprf-exact-surrogate": "surrogate"}
#: Methods whose solves run conjugate gradients above ``max_cholesky_size`` (their iterations are reported).
CG_METHODS = (*EXACT_METHODS, *EXACT_ROUTE_STARTS)
LEARNING_RATE = 0.1
#: Lengthscale, outputscale and noise of ``exact-start`` and ``exact-warm``.
SENSIBLE_START = {"lengthscale": 1.0, "outputscale": 1.0, "noise": 0.1}
#: ``exact-warm``: rows of the subsample, and the most Adam steps and share of the budget spent on it.
WARM_ROWS, WARM_STEPS, WARM_SHARE = 2000, 100, 0.5
#: Relative residual of the reported CG solves: GPyTorch's default prediction tolerance (``eval_cg_tolerance``).
CG_TOLERANCE = 0.01


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The methods' sizes (inducing points and minibatch are capped at the training size by :meth:`capped`), and
    ``gprf-exact``'s preconditioner (``"nystrom"`` or ``"random_features"``) with its points or features."""

    inducing_points: int
    batch_size: int
    rff_features: int
    preconditioner_features: int = 1024
    preconditioner: str = "nystrom"

    def capped(self, num_train: int) -> Sizes:
        return dataclasses.replace(
            self, inducing_points=min(self.inducing_points, num_train), batch_size=min(self.batch_size, num_train)
        )


def checkpoint_times(budget: float, count: int) -> list[float]:
    """``count`` checkpoints of the training clock, doubling up to the budget: :math:`b/2^{c-1}, \\dots, b/2, b`."""
    return [budget / 2**k for k in reversed(range(count))]


def predictive_metrics(mean: Tensor, variance: Tensor, target: Tensor) -> dict[str, float]:
    r"""Test RMSE :math:`\sqrt{\frac1M\sum_i(\mu_i - y_i)^2}`, MAE :math:`\frac1M\sum_i|\mu_i - y_i|` and NLL
    :math:`\frac1M\sum_i -\log N(y_i; \mu_i, \sigma_i^2)` of a Gaussian predictive (``variance`` includes the
    likelihood noise), in float64."""
    mean, variance, target = (t.detach().to(torch.float64) for t in (mean, variance, target))
    error = mean - target
    return {
        "rmse": error.square().mean().sqrt().item(),
        "mae": error.abs().mean().item(),
        "nll": mnll(mean, variance, target).item(),
    }


class Clock:
    """Training wall clock that excludes the time spent in checkpoints (device synchronised at each reading)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.paused = 0.0
        synchronize(device)
        self.start = time.perf_counter()

    def seconds(self) -> float:
        synchronize(self.device)
        return time.perf_counter() - self.start - self.paused

    @contextlib.contextmanager
    def pause(self):
        synchronize(self.device)
        begin = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self.device)
            self.paused += time.perf_counter() - begin


class Contender:
    """A model, its likelihood and its prediction route; subclasses say how one training step goes."""

    #: Context of predictions (LOVE for the exact GP).
    predict_settings: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext

    def __init__(self, model: torch.nn.Module, likelihood: gpytorch.likelihoods.GaussianLikelihood) -> None:
        self.model = model
        self.likelihood = likelihood

    def predict(self, test_x: Tensor, clear_caches: bool = True) -> tuple[Tensor, Tensor]:
        """Predictive mean and variance (noise included), ``likelihood(model(x))``: cold, caches cleared first, or
        (``clear_caches=False``) the first prediction after training, which uses the caches training left (gprf's
        ``fit_mll`` hands its refit's factor over; the others leave their models in training mode, without one)."""
        if clear_caches:
            self.model.train()  # drops the prediction caches of exact GPs and the variational strategy's K_uu factor
        self.model.eval()
        self.likelihood.eval()
        with torch.no_grad(), self.predict_settings():
            output = self.likelihood(self.model(test_x))
            return output.mean, output.variance

    def evaluate(self, split: Split, device: torch.device, clear_caches: bool = True) -> dict[str, float]:
        """Test metrics and the seconds of a prediction (:meth:`predict`); the modules' training flags are
        restored."""
        modes = {module: module.training for module in (self.model, self.likelihood)}
        (mean, variance), seconds = timed(lambda: self.predict(split.test_x, clear_caches), device)
        for module, training in modes.items():
            module.train(training)
        return {**predictive_metrics(mean, variance, split.test_y), "predict_s": seconds}

    def noise(self) -> float:
        return self.likelihood.noise.detach().flatten()[0].item()


class MarginalLikelihoodContender(Contender):
    """An exact-GP-style model trained on all ``N`` rows by ``ExactMarginalLogLikelihood`` (plus its added loss
    terms, e.g. SGPR's trace term)."""

    def __init__(self, model: RegressionGP) -> None:
        super().__init__(model, model.likelihood)
        self.mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)

    def loss(self) -> Tensor:
        return -self.mll(self.model(*self.model.train_inputs), self.model.train_targets)


@contextlib.contextmanager
def exact_prediction_settings():
    """Predictions of the CG-based exact GPs: LOVE variances (``fast_pred_var``) and the mean solved to
    :data:`PREDICTION_TOLERANCE`, the tolerance of gprf's exact route, for every one of them."""
    with gpytorch.settings.fast_pred_var(), gpytorch.settings.eval_cg_tolerance(PREDICTION_TOLERANCE):
        yield


class ExactContender(MarginalLikelihoodContender):
    predict_settings = staticmethod(exact_prediction_settings)


class SVGPModel(gpytorch.models.ApproximateGP):
    """``ConstantMean`` + ``ScaleKernel(ARD RBF)`` with a whitened Cholesky variational posterior at
    learned inducing points."""

    def __init__(self, inducing_points: Tensor) -> None:
        distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing_points.shape[0])
        strategy = gpytorch.variational.VariationalStrategy(
            self, inducing_points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(RBFKernel(ard_num_dims=inducing_points.shape[-1]))

    def forward(self, x: Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class SVGPContender(Contender):
    """SVGP: one step is one minibatch of the ``VariationalELBO`` (epochs of seeded shuffles)."""

    def __init__(self, split: Split, sizes: Sizes, seed: int) -> None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood()
        model = SVGPModel(seeded_rows(split.train_x, sizes.inducing_points, seed).clone())
        super().__init__(model.to(split.train_x), likelihood.to(split.train_x))
        self.train_x, self.train_y, self.batch_size = split.train_x, split.train_y, sizes.batch_size
        self.elbo = gpytorch.mlls.VariationalELBO(self.likelihood, self.model, num_data=self.train_y.numel())
        self.generator = torch.Generator().manual_seed(seed)
        self.batches: list[Tensor] = []

    def loss(self) -> Tensor:
        if not self.batches:
            order = torch.randperm(self.train_y.numel(), generator=self.generator).to(self.train_x.device)
            self.batches = list(order.split(self.batch_size))[::-1]  # popped from the end
        rows = self.batches.pop()
        return -self.elbo(self.model(self.train_x[rows]), self.train_y[rows])


def seeded_rows(x: Tensor, count: int, seed: int) -> Tensor:
    """``count`` distinct rows of ``x`` drawn with ``seed``."""
    rows = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:count]
    return x[rows.to(x.device)]


def build_contender(method: str, split: Split, sizes: Sizes, num_features: int | None, seed: int) -> Contender:
    """The untrained model of ``method`` on the training rows of ``split`` (GPyTorch's initial hyperparameters).

    The global RNG is seeded with ``seed`` by the caller (``RFFKernel`` draws its frequencies from it)."""
    x, y, d = split.train_x, split.train_y, split.train_x.shape[-1]
    if method == "exact":
        return ExactContender(RegressionGP(x, y, RBFKernel(ard_num_dims=d)))
    if method in ("exact-start", "exact-warm"):
        return ExactContender(_started_sensibly(RegressionGP(x, y, RBFKernel(ard_num_dims=d))))
    if method in EXACT_ROUTE_STARTS:
        model = _started_sensibly(RegressionGP(x, y, RBFKernel(ard_num_dims=d)))
        model.covar_module = PreconditionedKernel(
            model.covar_module,
            sizes.preconditioner_features,
            preconditioner=sizes.preconditioner,
            seed=seed,
            block_rows=max(x.shape[0], 1),
        ).to(x)
        return ExactContender(model)
    if method == "sgpr":
        model = RegressionGP(x, y, RBFKernel(ard_num_dims=d))
        inducing = seeded_rows(x, sizes.inducing_points, seed).clone()
        model.covar_module = InducingPointKernel(model.covar_module, inducing, model.likelihood)
        return MarginalLikelihoodContender(model)
    if method == "svgp":
        return SVGPContender(split, sizes, seed)
    if method == "rff":
        return MarginalLikelihoodContender(
            RegressionGP(x, y, RFFKernel(num_samples=sizes.rff_features // 2, num_dims=d, ard_num_dims=d))
        )
    if method == "gprf":
        kernel = RandomFourierKernel(num_features, d, sampler="orthogonal", seed=seed, ard_num_dims=d)
        return MarginalLikelihoodContender(RegressionGP(x, y, kernel))
    raise ValueError(f"Unknown method {method!r}; valid choices are: {', '.join(METHODS)}.")


def _started_sensibly(model: RegressionGP) -> RegressionGP:
    """``model`` at :data:`SENSIBLE_START`."""
    model.covar_module.base_kernel.lengthscale = SENSIBLE_START["lengthscale"]
    model.covar_module.outputscale = SENSIBLE_START["outputscale"]
    model.likelihood.noise = SENSIBLE_START["noise"]
    return model


class Run:
    """A training run's clock (from :meth:`start`), step count and the test metrics at the checkpoints of its
    clock before ``budget`` (taken by :meth:`step` with the clock paused)."""

    def __init__(self, contender: Contender, split: Split, budget: float, checkpoints: int, device: torch.device):
        self.contender, self.split, self.device = contender, split, device
        self.pending = [t for t in checkpoint_times(budget, checkpoints) if t < budget]
        self.points: list[dict] = []
        self.steps = 0
        self.clock = Clock(device)
        self.train_s = 0.0

    def start(self) -> None:
        """Start the training clock (after the set-up, such as building the optimizer, that is not training)."""
        self.clock = Clock(self.device)

    def step(self, **details: str) -> None:
        """Count a finished step; evaluate when the clock has passed the next checkpoint(s)."""
        self.train_s = self.clock.seconds()
        self.steps += 1
        if self.pending and self.train_s >= self.pending[0]:
            while self.pending and self.train_s >= self.pending[0]:
                self.pending.pop(0)
            with self.clock.pause():
                metrics = self.contender.evaluate(self.split, self.device)
            self.points.append({"train_s": self.train_s, "steps": self.steps, **details, **metrics})

    def finish(self) -> dict:
        """The final point: training clock, steps and test metrics of the trained model (its first prediction
        after training: caches training built count in ``train_s``)."""
        self.train_s = self.clock.seconds()
        metrics = self.contender.evaluate(self.split, self.device, clear_caches=False)
        return {"train_s": self.train_s, "steps": self.steps, **metrics}


def _adam(contender: Contender) -> torch.optim.Adam:
    """Adam on every trainable parameter of the contender (its modules in training mode)."""
    modules = (contender.model, contender.likelihood)
    params = [p for p in dict.fromkeys(p for m in modules for p in m.parameters()) if p.requires_grad]
    for module in modules:
        module.train()
    return torch.optim.Adam(params, lr=LEARNING_RATE)


def _adam_steps(contender: Contender, run: Run, optimizer: torch.optim.Optimizer, until: float, steps: float) -> None:
    """Adam steps on the contender's own loss, at most ``steps``, each started only while the clock plus the longest
    step so far stays before ``until`` — the rule by which :func:`gprf.fit_mll` keeps its budget, so that every
    method trains within the same minute (a step is never cut short; one misjudged step may overshoot)."""
    done, longest = 0, 0.0
    begin = run.clock.seconds()
    while done < steps and begin + longest < until:
        optimizer.zero_grad(set_to_none=True)
        contender.loss().backward()
        optimizer.step()
        run.step()  # reads the clock into run.train_s (before any checkpoint, which the clock leaves out)
        longest = max(longest, run.train_s - begin)
        begin = run.train_s
        done += 1


def train_adam(contender: Contender, run: Run, budget: float) -> None:
    """Adam steps on the contender's own loss until the training clock reaches ``budget``."""
    optimizer = _adam(contender)
    run.start()
    _adam_steps(contender, run, optimizer, budget, math.inf)


def train_warm(contender: MarginalLikelihoodContender, run: Run, budget: float, seed: int) -> None:
    """``exact-warm``: Adam on a seeded subsample of :data:`WARM_ROWS` training rows by Cholesky (at most
    :data:`WARM_STEPS` steps, until :data:`WARM_SHARE` of the budget), then Adam on every row until ``budget``; one
    optimizer throughout (the loss is per point, so its state carries over)."""
    model = contender.model
    x, y = model.train_inputs[0], model.train_targets
    optimizer = _adam(contender)
    run.start()
    rows = torch.randperm(y.numel(), generator=torch.Generator().manual_seed(seed))[:WARM_ROWS].to(y.device)
    model.set_train_data(x[rows], y[rows], strict=False)
    with gpytorch.settings.max_cholesky_size(WARM_ROWS):
        _adam_steps(contender, run, optimizer, WARM_SHARE * budget, WARM_STEPS)
    model.set_train_data(x, y, strict=False)
    _adam_steps(contender, run, optimizer, budget, math.inf)


def train_recipe(contender: MarginalLikelihoodContender, run: Run, budget: float, exact_start: str) -> None:
    """:func:`gprf.fit_mll` with ``time_budget=budget`` (and ``exact_start``, for exact models); a step (and possibly
    a checkpoint) at each call of its ``callback``: every tuning step and the end of every stage."""
    run.start()
    gprf.fit_mll(
        contender.mll,
        time_budget=budget,
        exact_start=exact_start,
        callback=lambda stage, seconds: run.step(stage=stage),
    )


def run_contender(
    method: str,
    split: Split,
    sizes: Sizes,
    num_features: int | None,
    budget: float,
    checkpoints: int,
    seed: int,
    device: torch.device,
) -> dict:
    """Build and train ``method`` from seed ``seed`` (global RNG forked: the caller's stream is left alone);
    its final test metrics, training and prediction seconds, steps, learned noise and checkpoints."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)  # RFFKernel's frequencies, SVGP's initial variational mean, CG's probe vectors
        contender = build_contender(method, split, sizes, num_features, seed)
        run = Run(contender, split, budget, checkpoints, device)
        try:
            if method in GPRF_METHODS:
                train_recipe(contender, run, budget, EXACT_ROUTE_STARTS.get(method, "subsample"))
            elif method == "exact-warm":
                train_warm(contender, run, budget, seed)
            else:
                train_adam(contender, run, budget)
            final = run.finish()
            iterations = cg_iterations_per_solve(contender) if method in CG_METHODS else None
        except torch.cuda.OutOfMemoryError:
            raise CLIError(f"out of GPU memory training {method} at N={split.train_y.numel()}; lower --max-n") from None
    return {**final, "noise": contender.noise(), "cg_iterations": iterations, "checkpoints": [*run.points, final]}


def cg_iterations_per_solve(contender: MarginalLikelihoodContender) -> int | None:
    r"""Conjugate-gradient iterations of the contender's prediction mean solve :math:`\hat K^{-1}(y - \mu)` at its
    hyperparameters until the relative residual is below :data:`CG_TOLERANCE`, under the preconditioner its solves
    use: a :class:`~gprf.kernels.PreconditionedKernel`'s own, else GPyTorch's pivoted Cholesky of rank
    ``max_preconditioner_size`` (:func:`benchmarks.cg_iterations.pivoted_cholesky_preconditioner`). ``None`` where
    its solves take a Cholesky factorisation (at most ``max_cholesky_size`` rows) or CG does not reach the tolerance
    in ``max_cg_iterations``."""
    model = contender.model
    x, y = model.train_inputs[0], model.train_targets
    if y.numel() <= gpytorch.settings.max_cholesky_size.value():
        return None
    model.train()
    contender.likelihood.train()
    with torch.no_grad():
        prior = model(x)
        covariance = contender.likelihood(prior).lazy_covariance_matrix.evaluate_kernel()
        if isinstance(covariance, PreconditionedAddedDiagLinearOperator):
            preconditioner = covariance.preconditioner.solve
        else:  # the kernel matrix is evaluated once (GPyTorch caches it) for both
            kernel_matrix = prior.lazy_covariance_matrix.evaluate_kernel()
            rank = gpytorch.settings.max_preconditioner_size.value()
            preconditioner = pivoted_cholesky_preconditioner(kernel_matrix, contender.likelihood.noise, rank)
        counts = cg_iterations(
            covariance.matmul,
            (y - prior.mean).unsqueeze(-1),
            preconditioner,
            (CG_TOLERANCE,),
            gpytorch.settings.max_cg_iterations.value(),
        )
    return counts[CG_TOLERANCE]
