"""Random-feature GPs on data that does not fit in memory or on one device.

For fixed hyperparameters the posterior and the marginal likelihood of a random-feature GP depend on the
data only through sums (in the factor dtype, float64 by default) of size :math:`O(F^2)`
(:class:`SufficientStatistics`). :class:`StreamingFit`
accumulates them chunk by chunk from a GPyTorch model's modules, :func:`all_reduce_statistics` sums them
over ``torch.distributed`` ranks, and :class:`StreamingPredictor` predicts chunk by chunk from them.
"""

from gprf.streaming.accumulator import StreamingFit, iterate_chunks
from gprf.streaming.distributed import all_reduce_statistics
from gprf.streaming.predictor import Prediction, StreamingPredictor
from gprf.streaming.statistics import SufficientStatistics

__all__ = [
    "Prediction",
    "StreamingFit",
    "StreamingPredictor",
    "SufficientStatistics",
    "all_reduce_statistics",
    "iterate_chunks",
]
