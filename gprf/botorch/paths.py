r"""Matheron paths whose prior and update share one featurisation of their inputs.

gprf's Matheron paths (:func:`~gprf.botorch.weight_space_matheron_paths`,
:func:`~gprf.botorch.multitask_matheron_paths`) are linear in one feature map :math:`\phi` of the transformed inputs
:math:`z = T(x)`:

.. math::
    (f\mid y)(x) = \underbrace{\mu(z) + \phi(z)^\top w}_{\text{prior path}}
    + \underbrace{\phi(z)^\top v}_{\text{update path}}.

BoTorch's ``MatheronPath`` evaluates its two paths in turn, each transforming and featurising the inputs, so a
candidate set would be featurised twice, the costly part of evaluating a path (Thompson sampling pays it on every
candidate set). :class:`SharedFeatureMatheronPath` computes :math:`z` and :math:`\phi(z)` once and combines them with
both weights.
"""

from __future__ import annotations

from typing import Any

from botorch.models.transforms.input import InputTransform
from botorch.sampling.pathwise.paths import GeneralizedLinearPath, SamplePath
from botorch.sampling.pathwise.posterior_samplers import MatheronPath
from torch import Tensor


class SharedFeatureMatheronPath(MatheronPath):
    r"""BoTorch's ``MatheronPath`` for a prior path and an update path that share their feature map and input
    transform (the same objects): evaluated as a whole, it transforms and featurises its inputs once (module
    docstring), and gives the values of BoTorch's sum of the two paths.

    ``paths["prior_paths"]`` and ``paths["update_paths"]`` stay BoTorch ``GeneralizedLinearPath``\ s that can be
    evaluated alone. When they do not share their features (e.g. a caller replaced one of them), the path is
    evaluated as BoTorch's ``MatheronPath`` is.
    """

    def forward(self, x: Tensor, **kwargs: Any) -> Tensor:
        prior, update = self.paths["prior_paths"], self.paths["update_paths"]
        if not _share_features(prior, update):
            return super().forward(x, **kwargs)
        # As GeneralizedLinearPath evaluates each path (its input transform applied as BoTorch's paths apply it).
        transform = prior.input_transform
        if transform is not None:
            x = transform.forward(x) if isinstance(transform, InputTransform) else transform(x)
        if prior.is_ensemble and not prior.ensemble_as_batch:
            x = x.unsqueeze(-3)
        features = prior.feature_map(x, **kwargs)
        values = (features @ prior.weight.unsqueeze(-1)).squeeze(-1)
        if prior.bias_module is not None:
            values = values + prior.bias_module(x)
        return values + (features @ update.weight.unsqueeze(-1)).squeeze(-1)


def _share_features(prior: SamplePath, update: SamplePath) -> bool:
    """Whether ``prior`` and ``update`` are linear paths on the same feature map and input transform, with no bias on
    the update and no output transform of their own (so that their sum is one featurisation and two weights)."""
    return (
        isinstance(prior, GeneralizedLinearPath)
        and isinstance(update, GeneralizedLinearPath)
        and update.feature_map is prior.feature_map
        and update.input_transform is prior.input_transform
        and update.bias_module is None
        and prior.output_transform is None
        and update.output_transform is None
        and (update.is_ensemble, update.ensemble_as_batch) == (prior.is_ensemble, prior.ensemble_as_batch)
    )
