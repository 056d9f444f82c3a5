r"""Matheron paths whose prior and update share one featurisation of their inputs.

gprf's Matheron paths (:func:`~gprf.botorch.weight_space_matheron_paths`,
:func:`~gprf.botorch.multitask_matheron_paths`) are linear in one feature map :math:`\phi` of the transformed inputs
:math:`z = T(x)`:

.. math::
    (f\mid y)(x) = \underbrace{\mu(z) + \phi(z)^\top w}_{\text{prior path}}
    + \underbrace{\phi(z)^\top v}_{\text{update path}}.

BoTorch's ``MatheronPath`` evaluates its two paths in turn, each transforming and featurising the inputs, so a
candidate set would be featurised twice (Thompson sampling pays it on every candidate set); and each path multiplies
the features with its weights ``sample_shape x batch x F`` as a matrix-vector product per sample, broadcasting the
:math:`n\times F` features over the samples: an :math:`S\times n\times F` copy of them, seconds and gigabytes for
100 paths at a few thousand candidates. :class:`SharedFeatureMatheronPath` computes :math:`z` and :math:`\phi(z)`
once and multiplies them with the weights of all samples as the columns of one matrix product per batch member
(:func:`linear_path_values`).
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
    docstring), and gives the values of BoTorch's sum of the two paths (up to the order of the sums over features:
    rounding).

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
        values = linear_path_values(features, prior.weight)
        if prior.bias_module is not None:
            values = values + prior.bias_module(x)
        return values + linear_path_values(features, update.weight)


def linear_path_values(features: Tensor, weight: Tensor) -> Tensor:
    """BoTorch's ``GeneralizedLinearPath`` values ``(features @ weight.unsqueeze(-1)).squeeze(-1)`` for features
    ``batch x n x F`` and weights ``sample x batch x F`` (batch dimensions broadcast, aligned from the right), with the
    sample dimensions — those of ``weight`` beyond the features' batch — as the columns of one matrix product per batch
    member, so that the features are never copied per sample. Returns ``sample x batch x n``."""
    num_samples_dims = weight.dim() - 1 - (features.dim() - 2)
    if num_samples_dims <= 0:  # no sample dimension to fold (the inputs carry the samples' batch)
        return (features @ weight.unsqueeze(-1)).squeeze(-1)
    sample_shape = weight.shape[:num_samples_dims]
    columns = weight.reshape(-1, *weight.shape[num_samples_dims:]).movedim(0, -1)  # batch x F x samples
    values = features @ columns  # batch x n x samples
    return values.movedim(-1, 0).reshape(*sample_shape, *values.shape[:-1])


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
