r"""Prediction from rows sharded over ranks: every rank holds the whole data's :math:`F\times F` posterior.

After training (:class:`~gprf.distributed.ShardedMarginalLogLikelihood`, :func:`gprf.fit_mll`) each rank's model
still holds only its own rows, so its own ``model(x)`` in eval mode would predict from them alone. Instead each rank
streams its rows into :class:`~gprf.streaming.SufficientStatistics`, one all-reduce sums them
(:mod:`gprf.distributed.sums`), and every rank builds the same :class:`~gprf.streaming.StreamingPredictor`: the
weight posterior :math:`N(C^{-1}b, C^{-1})` of all the rows, from which each rank predicts its own test points,
chunk by chunk, with no further communication.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.models import ExactGP

from gprf._checks import check_positive_int
from gprf.distributed.exchange import ShardExchange
from gprf.distributed.identity import transform_state
from gprf.distributed.sums import ShardParts, sum_over_ranks
from gprf.fitting.scale_fit import training_inputs
from gprf.kernels import unwrap_scale_kernel
from gprf.settings import feature_chunk_size
from gprf.streaming import StreamingFit, StreamingPredictor, SufficientStatistics, iterate_chunks

# G (symmetric), b, q and sum(log noise).
_SYMMETRIC = (True, False, False, False)


def _local_statistics(model: ExactGP, chunk_size: int | None) -> SufficientStatistics:
    """This rank's statistics of its training rows (as the model's forward sees them in training mode)."""
    was_training = model.training
    model.train()  # BoTorch models hold untransformed inputs in training mode and transform them in forward
    try:
        inputs, targets = training_inputs(model), model.train_targets
    finally:
        model.train(was_training)
    likelihood = model.likelihood
    noise = likelihood.noise_covar.noise if isinstance(likelihood, FixedNoiseGaussianLikelihood) else None
    fit = StreamingFit.from_model(model)
    if targets.size(-1) == 0:  # an empty shard: one empty chunk gives the statistics' shapes, all zeros
        return fit.update(inputs, targets, noise).statistics
    if chunk_size is None:
        chunk_size = feature_chunk_size.chunk_rows(unwrap_scale_kernel(model.covar_module).root_dim)
    return fit.fit(iterate_chunks(inputs, targets, noise, chunk_size=chunk_size)).statistics


def sharded_statistics(model: ExactGP, exchange: ShardExchange, chunk_size: int | None = None) -> SufficientStatistics:
    """The :class:`~gprf.streaming.SufficientStatistics` of every rank's training rows, on every rank.

    Call it on every rank. ``chunk_size``: rows featurized at a time (``None``: about :math:`2^{23}/F`). Raises
    :class:`~gprf.exceptions.ShardMismatchError` when the ranks' models differ, and an exception of one rank on every
    rank.
    """
    try:
        local, failure = _local_statistics(model, chunk_size), None
        parts = ShardParts(
            [local.gram, local.rhs, local.quadratic, local.log_noise],
            _SYMMETRIC,
            int(local.num_data),
            local.fingerprint,
            local.root_dim,
            transform_state(model),
            agreed=[("the number of features", local.root_dim), ("the input dimension", local.input_dim)],
        )
    except Exception as error:  # raised on every rank by the sum, so that none waits for the others
        parts, failure = None, error
    totals = sum_over_ranks(exchange, "posterior statistics", parts, failure)
    gram, rhs, quadratic, log_noise = totals.sums
    return SufficientStatistics(
        gram,
        rhs,
        quadratic,
        log_noise,
        num_data=torch.tensor(float(totals.num_rows), dtype=gram.dtype, device=gram.device),
        fingerprint=local.fingerprint,
        input_dim=local.input_dim,
    )


def sharded_predictor(
    model: ExactGP, group: dist.ProcessGroup | None = None, chunk_size: int | None = None
) -> StreamingPredictor:
    r"""A :class:`~gprf.streaming.StreamingPredictor` of the posterior of every rank's training rows, on every rank.

    Call it on every rank after training, with each rank's model holding its own rows; then each rank predicts its
    own test points (``predictor.predict(x_test, chunk_size=...)``: the latent mean and variance; add the
    likelihood's noise for new observations). The predictor holds the :math:`F\times F` factor, not the rows.

    Args:
        model: An ``ExactGP`` with a gprf feature kernel and a Gaussian likelihood, holding this rank's rows.
        group: The process group (default: the world).
        chunk_size: Rows featurized at a time (``None``: about :math:`2^{23}/F`), at least 1.

    Example:
        >>> predictor = gprf.distributed.sharded_predictor(model)
        >>> mean, variance = predictor.predict(x_test_shard, chunk_size=10_000)
    """
    if chunk_size is not None:
        check_positive_int(chunk_size, "chunk_size")
    statistics = sharded_statistics(model, ShardExchange(group), chunk_size)
    return StreamingPredictor.from_statistics(statistics, model.covar_module, getattr(model, "mean_module", None))
