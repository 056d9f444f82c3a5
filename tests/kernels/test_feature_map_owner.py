"""gprf.kernels.feature_map_owner: what kernels owning a random feature map share — the input dimension they are
built for, inputs divided by a positive lengthscale (or not, for scale-free targets), shared feature draws, batch
indexing and expansion that keep the draws aligned, and the device and dtype of kernels without a lengthscale."""

from __future__ import annotations

import pickle

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.features import RandomFourierFeatures
from gprf.kernels import ArcCosineQuadratureKernel, RandomFeatureKernel, RandomFourierKernel


@pytest.fixture
def x64():
    return torch.randn(30, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_inputs_with_the_wrong_number_of_columns_get_a_clear_error(x64):
    kernel = RandomFourierKernel(16, num_dims=3, seed=0).double()
    with pytest.raises(ValueError, match=r"built for inputs with 3 columns.*num_dims=2"):
        kernel.features(x64[:, :2])
    with pytest.raises(ValueError, match="3 columns"):
        ScaleKernel(kernel)(x64[:, :2]).to_dense()


def test_share_features_uses_one_draw_for_every_batch_member():
    kernel = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=0).double()
    kernel.lengthscale = torch.tensor([0.5, 0.5, 2.0], dtype=torch.float64).view(3, 1, 1)
    first_member_draws = kernel.feature_map.frequencies[0].clone()
    assert kernel.share_features() is kernel
    assert kernel.feature_map.batch_shape == torch.Size()
    torch.testing.assert_close(kernel.feature_map.frequencies, first_member_draws)
    x = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    covariance = kernel(x).to_dense()
    assert covariance.shape == (3, 5, 5)
    torch.testing.assert_close(covariance[0], covariance[1], rtol=0, atol=0)  # same lengthscale, same features
    assert not torch.allclose(covariance[0], covariance[2])
    fresh = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=1).double().share_features()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), covariance, rtol=0, atol=0)
    kernel.resample_features(torch.Generator().manual_seed(2))
    assert kernel.feature_map.frequencies.shape == first_member_draws.shape


def test_kernels_resolve_their_input_dimension_or_refuse():
    with pytest.raises(ValueError, match="RandomFourierKernel needs the input dimension"):
        RandomFourierKernel(64)
    with pytest.raises(ValueError, match="ard_num_dims"):
        RandomFourierKernel(64, num_dims=3, ard_num_dims=2)


def test_lengthscale_must_be_positive(x64):
    kernel = RandomFourierKernel(16, num_dims=3, ard_num_dims=3, seed=0).double()
    for bad in (-1.0, 0.0, torch.tensor([0.5, -0.1, 2.0], dtype=torch.float64)):
        with pytest.raises(ValueError, match="lengthscale must be positive"):
            kernel.lengthscale = bad
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        kernel.initialize(lengthscale=0.0)
    kernel.lengthscale = torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    torch.testing.assert_close(kernel.lengthscale, torch.tensor([[0.5, 1.5, 2.0]], dtype=torch.float64))
    # What the map sees: the inputs divided by the lengthscale, column by column.
    torch.testing.assert_close(kernel.scale_inputs(x64), x64 / torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64))


def test_scale_free_kernels_pass_the_inputs_unscaled(x64):
    kernel = ArcCosineQuadratureKernel(2, num_dims=3, seed=0).double()
    assert kernel.scale_inputs(x64) is x64
    torch.testing.assert_close(kernel.features(x64), kernel.feature_map(x64), rtol=0, atol=0)


class _MapKernel(RandomFeatureKernel):
    """The smallest concrete kernel around a given map."""

    def exact(self):
        return RBFKernel()


def test_kernels_without_an_exact_target_cannot_be_built():
    with pytest.raises(TypeError, match="abstract method exact"):
        RandomFeatureKernel(RandomFourierFeatures(3, 8, seed=0))


def test_a_map_with_another_batch_shape_is_refused():
    feature_map = RandomFourierFeatures(3, 8, batch_shape=(2,), seed=0)
    with pytest.raises(
        ValueError, match=r"feature_map.batch_shape \(2,\) differs from the kernel's batch_shape \(3,\)"
    ):
        _MapKernel(feature_map, batch_shape=torch.Size([3]))
    # Without batch dimensions the map is shared by every batch member.
    shared = _MapKernel(RandomFourierFeatures(3, 8, seed=0), batch_shape=torch.Size([3]))
    assert shared.num_features == 8 and shared.feature_map.batch_shape == torch.Size()


def test_device_and_dtype_without_a_lengthscale_come_from_the_draws():
    kernel = ArcCosineQuadratureKernel(1, num_dims=3, seed=0)
    assert list(kernel.parameters()) == []  # GPyTorch alone would report the default dtype and no device
    assert kernel.double().dtype == torch.float64 and kernel.float().dtype == torch.float32
    assert kernel.device == torch.device("cpu")
    kernel.feature_map.radii = kernel.feature_map.radii.double()  # one draw in float64, the other in float32
    with pytest.raises(RuntimeError, match="multiple dtypes"):
        _ = kernel.dtype
    # With a lengthscale, GPyTorch's answer (the lengthscale's dtype) stands.
    assert RandomFourierKernel(8, num_dims=3, seed=0).double().dtype == torch.float64


def test_indexing_a_batch_keeps_the_draws_of_the_member(x64):
    kernel = ArcCosineQuadratureKernel(1, num_dims=3, batch_shape=torch.Size([3]), seed=0).double()
    covariance = kernel(x64).to_dense()
    member = kernel[1]
    # No lengthscale carries the batch shape: the indexed draws do.
    assert member.batch_shape == torch.Size() and member.feature_map.batch_shape == torch.Size()
    torch.testing.assert_close(member(x64).to_dense(), covariance[1], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(covariance[0], covariance[1])


def test_expanding_a_batch_expands_the_draws(x64):
    batched = RandomFourierKernel(16, num_dims=3, batch_shape=torch.Size([2]), seed=0).double()
    expanded = batched.expand_batch(torch.Size([4, 2]))
    assert expanded.feature_map.batch_shape == torch.Size([4, 2])
    torch.testing.assert_close(expanded(x64).to_dense(), batched(x64).to_dense().expand(4, 2, 30, 30))


# ---------------------------------------------------------------------------------------- nested draws
def test_resize_features_replaces_the_map_by_a_nested_one_and_keeps_the_hyperparameters(x64):
    kernel = RandomFourierKernel(40, num_dims=3, sampler="orthogonal", seed=0).double()
    kernel.lengthscale = 0.7
    original = kernel.feature_map
    assert kernel.resize_features(12) is kernel
    assert kernel.num_features == 12 and kernel.feature_map is not original
    assert torch.equal(kernel.feature_map.frequencies, original.frequencies[:, :6])
    assert float(kernel.lengthscale) == pytest.approx(0.7)
    kernel.resize_features(40)
    assert torch.equal(kernel.feature_map.frequencies, original.frequencies)
    assert kernel.feature_map.draw_version != original.draw_version  # a new map object: a new version


def test_a_resized_kernel_state_loads_into_a_fresh_kernel_of_the_new_size_and_pickles(x64):
    kernel = RandomFourierKernel(16, num_dims=3, batch_shape=torch.Size([2]), seed=0).double()
    kernel.resize_features(64, torch.Generator().manual_seed(5))
    fresh = RandomFourierKernel(64, num_dims=3, batch_shape=torch.Size([2]), seed=1).double()
    assert not torch.allclose(fresh(x64).to_dense(), kernel(x64).to_dense())
    fresh.load_state_dict(kernel.state_dict())
    assert torch.equal(fresh(x64).to_dense(), kernel(x64).to_dense())
    clone = pickle.loads(pickle.dumps(kernel))
    assert torch.equal(clone(x64).to_dense(), kernel(x64).to_dense())
    # float32 keeps working, and the shrunk float32 kernel holds the rounded leading draws.
    single = clone.float().resize_features(16)
    assert single.feature_map.frequencies.dtype == torch.float32
    assert torch.equal(single.feature_map.frequencies, kernel.feature_map.frequencies[..., :8].float())
    torch.testing.assert_close(single(x64.float()).to_dense().double(), _kernel_16(x64), rtol=0, atol=1e-5)


def _kernel_16(x):
    return RandomFourierKernel(16, num_dims=3, batch_shape=torch.Size([2]), seed=0).double()(x).to_dense()


def test_features_resized_swaps_the_map_and_restores_the_original_object(x64):
    kernel = RandomFourierKernel(32, num_dims=3, seed=0).double()
    original = kernel.feature_map
    with kernel.features_resized(8) as resized:
        assert resized is kernel and kernel.num_features == 8
        assert torch.equal(kernel.feature_map.frequencies, original.frequencies[:, :4])
    assert kernel.feature_map is original
    with pytest.raises(RuntimeError, match="inside"):
        with kernel.features_resized(8):
            raise RuntimeError("inside")
    assert kernel.feature_map is original


def test_features_resized_inside_a_training_step_of_a_gp():
    train_x = torch.rand(40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    train_y = torch.sin(4 * train_x).sum(-1)
    base = RandomFourierKernel(256, num_dims=2, seed=0)
    model = _gp(train_x, train_y, ScaleKernel(base)).double()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    original = base.feature_map
    model.train()
    with base.features_resized(16):
        loss = -mll(model(train_x), train_y)
        loss.backward()
        small_loss = float(loss)
    assert base.feature_map is original
    assert base.raw_lengthscale.grad is not None and bool(torch.isfinite(base.raw_lengthscale.grad).all())
    # The loss of the small map is that of a kernel built with its 16 features (the prefix of the 256).
    reference = _gp(train_x, train_y, ScaleKernel(RandomFourierKernel(256, num_dims=2, seed=0).resize_features(16)))
    reference = reference.double().train()
    reference_mll = gpytorch.mlls.ExactMarginalLogLikelihood(reference.likelihood, reference)
    assert small_loss == pytest.approx(float(-reference_mll(reference(train_x), train_y)), rel=1e-12)
    assert float(-mll(model(train_x), train_y)) != pytest.approx(small_loss)


def _gp(train_x, train_y, covar_module):
    class GP(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = covar_module

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    return GP()


def test_kernels_whose_maps_cannot_nest_refuse_clearly():
    kernel = ArcCosineQuadratureKernel(2, num_dims=3, seed=0)
    with pytest.raises(NotImplementedError, match="QuadratureFeatures cannot be resized: .*whole quadrature rules"):
        kernel.resize_features(8)
    with pytest.raises(NotImplementedError, match="cannot be resized"):
        with kernel.features_resized(8):
            pass
