"""Computation skeletons: the kernel recursion, the fully connected and convolution helpers, bad skeletons."""

from __future__ import annotations

import pytest
import torch

from gprf.features import DualActivation, InputNode, InternalNode, Skeleton
from gprf.features.dual_activations import relu_dual
from gprf.features.skeleton import augmented_unit


@pytest.fixture
def xy(generator):
    x = torch.randn(7, 6, generator=generator, dtype=torch.float64)
    return x, torch.randn(5, 6, generator=generator, dtype=torch.float64)


def test_fully_connected_kernels(xy):
    x, y = xy
    z1, z2 = augmented_unit(x, tuple(range(6))), augmented_unit(y, tuple(range(6)))
    k0 = z1 @ z2.mT
    torch.testing.assert_close(Skeleton.fully_connected(6, 2, "relu").kernel(x, y), relu_dual(relu_dual(k0)))
    # An exponential node on normalised inputs is the Gaussian kernel of the unit vectors.
    exp = Skeleton.fully_connected(6, 1, DualActivation.exponential(1.5))
    torch.testing.assert_close(exp.kernel(x, y), torch.exp(-0.5 * 1.5**2 * torch.cdist(z1, z2) ** 2))
    gaussian = Skeleton.fully_connected(6, 1, "identity", base_kernel="gaussian")
    torch.testing.assert_close(gaussian.kernel(x, y), torch.exp(-0.5 * torch.cdist(x, y) ** 2))
    torch.testing.assert_close(gaussian.kernel(x[:5], y, diag=True), gaussian.kernel(x[:5], y).diagonal())


def test_mean_over_inputs_and_sharing(xy):
    x, y = xy
    # Node 2 averages the two base kernels, node 3 reuses node 0 and node 2.
    sk = Skeleton(
        6,
        [InputNode((0, 1, 2)), InputNode((3, 4, 5), "gaussian")],
        [InternalNode((0, 1), "identity"), InternalNode((0, 2), "relu")],
    )
    k_a = augmented_unit(x, (0, 1, 2)) @ augmented_unit(y, (0, 1, 2)).mT
    k_b = torch.exp(-0.5 * torch.cdist(x[:, 3:], y[:, 3:]) ** 2)
    torch.testing.assert_close(sk.kernel(x, y), relu_dual((k_a + (k_a + k_b) / 2) / 2))
    assert sk.output == 3 and sk.depth == 2


def test_convolutional_structure(xy):
    sk = Skeleton.convolutional((8, 8), patch_size=3, num_layers=2)
    assert sk.num_inputs == 64 and len(sk.internal_nodes) == 36 + 16 + 1
    assert sk.internal_nodes[0].inputs == (0, 1, 2, 8, 9, 10, 16, 17, 18)
    assert abs(sk.complexity - 1.0) < 0.01  # ReLU: sigma_hat'(1) = 1 at every node
    one_d = Skeleton.convolutional(6, patch_size=3, stride=2, num_layers=1, activation="exponential")
    assert [n.inputs for n in one_d.internal_nodes[:-1]] == [(0, 1, 2), (2, 3, 4), (3, 4, 5)]  # the border is covered
    assert one_d.complexity == pytest.approx(1.0, abs=1e-12)
    x = torch.rand(20, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    k = sk.kernel(x, x)
    torch.testing.assert_close(k.diagonal(), torch.ones(20, dtype=torch.float64))
    assert float(torch.linalg.eigvalsh(k).min()) > -1e-10


def test_bad_skeletons():
    with pytest.raises(ValueError, match="cycle: internal nodes \\[1, 2, 3\\]"):
        Skeleton(
            2,
            [InputNode((0, 1))],
            [InternalNode((0, 2), "relu"), InternalNode((1,), "relu"), InternalNode((2,), "relu")],
        )
    with pytest.raises(ValueError, match="internal node 1 has no inputs"):
        Skeleton(2, [InputNode((0, 1))], [InternalNode((), "relu")])
    with pytest.raises(ValueError, match="nodes \\[1, 2\\] feed nothing"):
        Skeleton(2, [InputNode((0,)), InputNode((1,))], [InternalNode((0,), "relu")])
    with pytest.raises(ValueError, match="receptive field \\(0, 3\\)"):
        Skeleton(3, [InputNode((0, 3))])
    with pytest.raises(ValueError, match="empty receptive field"):
        Skeleton(3, [InputNode(())])
    with pytest.raises(ValueError, match="invalid inputs \\[5\\]"):
        Skeleton(2, [InputNode((0, 1))], [InternalNode((5,), "relu")])
    with pytest.raises(ValueError, match="lists an input twice"):
        Skeleton(2, [InputNode((0, 1))], [InternalNode((0, 0), "relu")])
    with pytest.raises(ValueError, match="'linear', 'gaussian'"):
        InputNode((0,), "laplace")
    with pytest.raises(ValueError, match="sum to 1"):
        Skeleton.fully_connected(3, 1, [0.5, 0.6])
    with pytest.raises(ValueError, match="input_shape"):
        Skeleton.convolutional((2, 2, 2))


def test_input_shape_mismatch():
    sk = Skeleton.convolutional((8, 8), num_layers=1)
    with pytest.raises(ValueError, match=r"\(\.\.\., n, 64\) \(inputs of shape \(8, 8\) flattened row-major\)"):
        sk.kernel(torch.zeros(3, 8, 8), torch.zeros(3, 8, 8))
