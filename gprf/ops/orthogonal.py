"""Random orthogonal matrices."""

from __future__ import annotations

import torch
from torch import Tensor


def haar_orthogonal(
    batch_shape: torch.Size | tuple[int, ...],
    dim: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Draw Haar-distributed (uniform) orthogonal matrices of shape ``(*batch_shape, dim, dim)``.

    Uses the QR decomposition of a Gaussian matrix with the sign correction of Mezzadri (2007):
    :math:`Q \leftarrow Q\,\mathrm{diag}(\mathrm{sign}(\mathrm{diag}\,R))`, without which the law of
    :math:`Q` is not Haar. The draw is made on the CPU in float64 (construction time only, so the
    result is identical across devices for a given generator) and then moved.

    Reference: F. Mezzadri. *How to Generate Random Matrices from the Classical Compact Groups.* Notices of the
    American Mathematical Society 54(5), 2007.
    """
    if dim < 1:
        raise ValueError(f"haar_orthogonal needs dim >= 1, got {dim}.")
    gaussian = torch.randn(*batch_shape, dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return (q * signs.unsqueeze(-2)).to(dtype=dtype, device=device)
