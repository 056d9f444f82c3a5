"""BoTorch integration (optional extra ``gprf[botorch]``).

Importing this module (gprf does it as soon as both gprf and BoTorch are imported, in either order; gprf itself
never imports BoTorch) adds gprf's entries to BoTorch's pathwise dispatchers, all in :mod:`gprf.botorch.dispatch`:

* every gprf feature kernel goes to BoTorch's pathwise feature generator, so prior sample paths use
  the kernel's own frozen features (:class:`KernelRootFeatureMap`): ``draw_matheron_paths``,
  ``get_matheron_path_model`` and ``PathwiseThompsonSampling`` sample exactly from the finite model;
* keeps every drawn path as it was drawn: paths hold frozen copies of the kernel (feature draws and
  hyperparameters), mean and transforms (:mod:`gprf.botorch.frozen`), so a later ``resample_features()`` or refit
  does not reach them;
* draws the prior path weights with one quasi-random point per path (:mod:`gprf.botorch.prior`; BoTorch's
  default weights are biased for batched, e.g. multi-output, models);
* draws BoTorch's Matheron paths for ``ExactGP`` models whose covariance is a gprf feature kernel in weight space,
  without evaluating the prior paths at the training inputs (:func:`weight_space_matheron_paths`:
  :math:`O(NF^2 + F^3 + SF^2)` work, no :math:`S\\times N` values), and routes BoTorch's Gaussian pathwise update
  for them through :func:`weight_space_update` (:math:`O(NF^2 + F^3 + SNF)` instead of a dense :math:`N\\times N`
  Cholesky broadcast over samples); every other model keeps BoTorch's own paths, update and prior sampler, bit for
  bit (:mod:`gprf.botorch.dispatch`);
* draws Matheron paths for BoTorch's ``MultiTaskGP`` with a gprf data kernel in weight space, with its per-task
  mean and noise (:func:`multitask_matheron_paths`; BoTorch has no pathwise route for ``MultiTaskGP``);
* evaluates gprf's Matheron paths with one featurisation of their inputs, shared by the prior and the update
  (:class:`~gprf.botorch.paths.SharedFeatureMatheronPath`);
* provides :class:`RandomFeatureSingleTaskGP`, :func:`single_task_gp` (the exact ``SingleTaskGP`` while it is the
  cheaper model, random features beyond), and trust regions for Thompson sampling in high dimensions
  (:class:`TrustRegion`, :func:`thompson_sample`), also with training rows and candidates sharded over
  ``torch.distributed`` ranks (:func:`sharded_thompson_sample`, :func:`sharded_matheron_paths`).
"""

try:
    import botorch  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError("gprf.botorch needs BoTorch: pip install 'gprf[botorch]'.") from error

from gprf.botorch import dispatch  # noqa: F401  (the registrations)
from gprf.botorch.features import KernelRootFeatureMap
from gprf.botorch.matheron import weight_space_matheron_paths
from gprf.botorch.models import RandomFeatureSingleTaskGP, output_batch_dims
from gprf.botorch.multitask import multitask_matheron_paths
from gprf.botorch.prior import path_weights
from gprf.botorch.sharded_sampling import sharded_matheron_paths, sharded_thompson_sample
from gprf.botorch.sized_model import exact_is_cheaper, single_task_gp
from gprf.botorch.trust_region import TrustRegion, model_lengthscale, thompson_sample
from gprf.botorch.update import weight_space_update

__all__ = [
    "KernelRootFeatureMap",
    "RandomFeatureSingleTaskGP",
    "TrustRegion",
    "exact_is_cheaper",
    "model_lengthscale",
    "multitask_matheron_paths",
    "output_batch_dims",
    "path_weights",
    "sharded_matheron_paths",
    "sharded_thompson_sample",
    "single_task_gp",
    "thompson_sample",
    "weight_space_matheron_paths",
    "weight_space_update",
]
