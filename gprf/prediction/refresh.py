r"""Prediction caches that follow the model: rebuilt when the kernel or the likelihood changed after they were built.

GPyTorch's ``ExactGP`` builds its prediction strategy once in eval mode and keeps it until ``model.train()``; a
hyperparameter changed in eval mode (an optimizer step, ``load_state_dict``, a gprf kernel's setter) or a new feature
draw (``resample_features``) would leave predictions on the old training cache. gprf's strategies stamp the state of
the covariance module and the likelihood (:func:`~gprf.features.versions.state_versions`: version counters, no host
synchronisation) when they are built and, on a prediction after a change, evaluate the training covariance and the
likelihood's noise again, so the answer is the one a fresh ``model.eval()`` gives; so they do after an in-place write
to the training inputs or targets.
"""

from __future__ import annotations

from gpytorch.lazy import LazyEvaluatedKernelTensor
from gpytorch.models.exact_prediction_strategies import DefaultPredictionStrategy
from gpytorch.utils.memoize import clear_cache_hook

from gprf.features.versions import state_versions, tensor_versions


class RefreshingPredictionStrategy(DefaultPredictionStrategy):
    """A GPyTorch prediction strategy whose training caches follow the kernel and the likelihood (module docstring).

    The kernel is the one GPyTorch evaluated lazily for the training covariance (the model's ``covar_module``): every
    gprf strategy gets such a covariance, since GPyTorch asks the kernel for its strategy only then. Strategies of
    fantasy models are built on the original model's modules while the fantasy model holds copies of them:
    :meth:`stop_following` makes them keep their caches (their feature draws are still checked by the subclasses).
    Changes GPyTorch's own setters write through ``.data`` (``ScaleKernel.outputscale = ...``,
    ``likelihood.noise = ...``) and changes of the mean module are not seen: call ``model.train()`` and
    ``model.eval()`` after them.
    """

    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood, root=None, inv_root=None) -> None:
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)
        self._built_on: tuple | None = self._model_state()

    def _model_state(self) -> tuple:
        covariance = self.train_prior_dist.lazy_covariance_matrix
        kernel = covariance.kernel if isinstance(covariance, LazyEvaluatedKernelTensor) else None
        # The training data too: GPyTorch hands the strategy the model's own tensors, which may be written in place.
        return state_versions(kernel, self.likelihood), tensor_versions(*self.train_inputs, self.train_labels)

    def stop_following(self) -> None:
        """Keep the caches whatever happens to the modules the strategy was built from (fantasy strategies)."""
        self._built_on = None

    def refresh_if_stale(self) -> None:
        """Rebuild the training caches when the kernel or the likelihood changed since they were built."""
        if self._built_on is None:
            return
        state = self._model_state()
        if state == self._built_on:
            return
        covariance = self.train_prior_dist.lazy_covariance_matrix
        if isinstance(covariance, LazyEvaluatedKernelTensor):
            # A new lazy covariance: the old one keeps its evaluation (with the old hyperparameters) cached.
            covariance = LazyEvaluatedKernelTensor(
                covariance.x1, covariance.x2, covariance.kernel, covariance.last_dim_is_batch, **covariance.params
            )
            self.train_prior_dist = self.train_prior_dist.__class__(self.train_prior_dist.mean, covariance)
        self.lik_train_train_covar = self.likelihood(self.train_prior_dist, self.train_inputs).lazy_covariance_matrix
        self._forget_caches()
        self._built_on = state

    def _forget_caches(self) -> None:
        """Drop every cache computed from the training covariance."""
        clear_cache_hook(self)
