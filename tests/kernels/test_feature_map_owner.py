"""gprf.kernels.feature_map_owner: what kernels owning a random feature map share — construction from a built map or
from the map's own arguments (the same kernel either way, for every family), the input dimension they are built for,
inputs divided by a positive lengthscale (or not, for scale-free targets), shared feature draws, batch indexing and
expansion that keep the draws aligned, and the device and dtype of kernels without a lengthscale."""

from __future__ import annotations

import pickle

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.features import (
    AdditiveFourierFeatures,
    CompositionalFeatures,
    MaclaurinFeatures,
    PolynomialSketch,
    QuadratureFeatures,
    RandomFourierFeatures,
    SignedRandomFeatures,
    Skeleton,
)
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineQuadratureKernel,
    CompositionalRandomFeatureKernel,
    LocalizedMaclaurinKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFeatureKernel,
    RandomFourierKernel,
    SignedRandomFeatureKernel,
)
from tests.helpers.regression import SPECTRUM


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


# ---------------------------------------------------------------------------------------- construction
def _families():
    """(name, kernel from the map's arguments, the same kernel around the built map) for every family."""
    skeleton = Skeleton.fully_connected(3, 2, "relu")
    return {
        "fourier": (
            lambda: RandomFourierKernel(16, 3, kernel="matern32", sampler="orthogonal", seed=0, ard_num_dims=3),
            lambda: RandomFourierKernel(
                feature_map=RandomFourierFeatures(3, 16, kernel="matern32", sampler="orthogonal", seed=0),
                ard_num_dims=3,
            ),
        ),
        "maclaurin": (
            lambda: MaclaurinKernel(16, 3, kernel="exponential", allocation="random", seed=0),
            lambda: MaclaurinKernel(MaclaurinFeatures(3, 16, kernel="exponential", allocation="random", seed=0)),
        ),
        "localized": (
            lambda: LocalizedMaclaurinKernel(16, 3, max_degree=4, seed=0),
            lambda: LocalizedMaclaurinKernel(
                feature_map=MaclaurinFeatures(3, 16, kernel="gaussian", max_degree=4, seed=0)
            ),
        ),
        "sketch": (
            lambda: PolynomialSketchKernel(8, 3, degree=3, sketch="srht", seed=0),
            lambda: PolynomialSketchKernel(feature_map=PolynomialSketch(3, 8, 3, sketch="srht", seed=0)),
        ),
        "offset": (
            lambda: OffsetPolynomialSketchKernel(8, 3, seed=0),
            lambda: OffsetPolynomialSketchKernel(feature_map=PolynomialSketch(4, 8, seed=0)),
        ),
        "quadrature": (
            lambda: QuadratureKernel(2, 3, rotation="butterfly", seed=0),
            lambda: QuadratureKernel(feature_map=QuadratureFeatures(3, 2, kernel="rbf", rotation="butterfly", seed=0)),
        ),
        "arc_cosine": (
            lambda: ArcCosineQuadratureKernel(2, 3, order=0, seed=0),
            lambda: ArcCosineQuadratureKernel(feature_map=QuadratureFeatures(3, 2, kernel="arccos0", seed=0)),
        ),
        "compositional": (
            lambda: CompositionalRandomFeatureKernel(skeleton, 16, deduplicate=False, seed=0),
            lambda: CompositionalRandomFeatureKernel(
                feature_map=CompositionalFeatures(skeleton, 16, deduplicate=False, seed=0)
            ),
        ),
        "signed": (
            lambda: SignedRandomFeatureKernel(8, SPECTRUM, num_dims=3, sampler="orthogonal", seed=0),
            lambda: SignedRandomFeatureKernel(feature_map=SignedRandomFeatures(3, 8, SPECTRUM, "orthogonal", seed=0)),
        ),
        "additive": (
            lambda: AdditiveFeatureKernel(4, 3, order=2, seed=0),
            lambda: AdditiveFeatureKernel(feature_map=AdditiveFourierFeatures(3, 4, order=2, seed=0)),
        ),
    }


@pytest.mark.parametrize("family", list(_families()))
def test_the_map_arguments_build_the_map_the_kernel_could_be_given(family, x64):
    from_arguments, from_map = (build().double() for build in _families()[family])
    assert type(from_arguments.feature_map) is type(from_map.feature_map)
    x = x64[:8]
    torch.testing.assert_close(from_arguments(x).to_dense(), from_map(x).to_dense(), rtol=0, atol=0)
    assert type(from_arguments.exact()) is type(from_map.exact())
    assert from_map.map_num_dims(from_map.feature_map) == 3


class _ShiftedFourierFeatures(RandomFourierFeatures):
    """A map that gained an argument; the others reach its base class through ``**kwargs``."""

    def __init__(self, input_dim, num_features, shift=0.0, **kwargs):
        super().__init__(input_dim, num_features, **kwargs)
        self.shift = shift


class _ShiftedFourierKernel(RandomFourierKernel):
    feature_map_class = _ShiftedFourierFeatures


def test_an_argument_added_to_a_map_is_an_argument_of_its_kernel():
    kernel = _ShiftedFourierKernel(8, 2, shift=0.5, kernel="matern12", sampler="orthogonal", seed=3, ard_num_dims=2)
    feature_map = kernel.feature_map
    assert type(feature_map) is _ShiftedFourierFeatures and feature_map.shift == 0.5
    assert (feature_map.kernel, feature_map.sampler, feature_map.seed) == ("matern12", "orthogonal", 3)
    assert kernel.ard_num_dims == 2 and kernel.lengthscale.shape == (1, 2)


def test_a_built_map_is_checked_against_the_kernel():
    feature_map = RandomFourierFeatures(3, 8, seed=0)
    with pytest.raises(TypeError, match="got feature_map= and the map arguments seed"):
        RandomFourierKernel(feature_map=feature_map, seed=1)
    with pytest.raises(TypeError, match="got feature_map= and the map arguments num_features"):
        RandomFourierKernel(16, feature_map=feature_map)
    with pytest.raises(TypeError, match="got two feature maps"):
        RandomFourierKernel(feature_map, feature_map=feature_map)
    with pytest.raises(
        TypeError, match="RandomFourierKernel needs a RandomFourierFeatures feature map, got Polynomial"
    ):
        RandomFourierKernel(feature_map=PolynomialSketch(3, 8, seed=0))
    with pytest.raises(ValueError, match=r"num_dims=2 does not match the feature map's input dimension \(3\)"):
        RandomFourierKernel(feature_map=feature_map, num_dims=2)
    with pytest.raises(ValueError, match="ard_num_dims=2 does not match num_dims=3"):
        RandomFourierKernel(feature_map=feature_map, ard_num_dims=2)
    with pytest.raises(TypeError, match=r"got unexpected arguments sampeler: it takes the arguments of RandomFourier"):
        RandomFourierKernel(8, 3, sampeler="qmc")
    with pytest.raises(TypeError, match="_MapKernel takes a built map: pass feature_map="):
        _MapKernel(8, 3)
    with pytest.raises(ValueError, match="QuadratureKernel approximates the RBF kernel, got .*'arccos1'"):
        QuadratureKernel(feature_map=QuadratureFeatures(3, 1, kernel="arccos1", seed=0))
    with pytest.raises(TypeError, match="QuadratureKernel approximates the RBF kernel"):
        QuadratureKernel(1, 3, kernel="arccos1")
    with pytest.raises(ValueError, match="ArcCosineQuadratureKernel approximates the arc-cosine kernels, got .*'rbf'"):
        ArcCosineQuadratureKernel(feature_map=QuadratureFeatures(3, 1, kernel="rbf", seed=0))
    with pytest.raises(ValueError, match="its sketch takes no bias"):
        OffsetPolynomialSketchKernel(feature_map=PolynomialSketch(4, 8, bias=1.0, seed=0))
    with pytest.raises(TypeError, match="its sketch takes no bias"):
        OffsetPolynomialSketchKernel(8, 3, bias=1.0)
    with pytest.raises(ValueError, match="the 'exponential' kernel is not shift invariant"):
        LocalizedMaclaurinKernel(feature_map=MaclaurinFeatures(3, 16, seed=0))


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
