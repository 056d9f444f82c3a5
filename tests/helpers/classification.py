"""Classification builders of the Dirichlet tests (the likelihoods', and the row-subsampled fit's): three-class data, a
model with distinct per-class hyperparameters, and the dense function-space reference."""

from __future__ import annotations

import torch
from gpytorch.kernels import RBFKernel

from gprf.kernels import RandomFourierKernel
from gprf.likelihoods import DirichletClassificationLikelihood, DirichletGPModel

NUM_CLASSES = 3


def make_data(n: int, seed: int = 0, dtype=torch.float64, batch_shape=()):
    """Three classes by angle around the centre of the unit square (every class present)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch_shape, n, 2, generator=generator, dtype=dtype)
    angle = torch.atan2(x[..., 1] - 0.5, x[..., 0] - 0.5) + torch.pi
    labels = (angle / (2 * torch.pi / NUM_CLASSES)).long().clamp(max=NUM_CLASSES - 1)
    return x, labels


def rff_factory(num_features: int = 32, seed: int = 0):
    return lambda batch_shape: RandomFourierKernel(num_features, num_dims=2, batch_shape=batch_shape, seed=seed)


def make_model(x, labels, kernel="rff", alpha_epsilon=0.05, learn_additional_noise=False):
    likelihood = DirichletClassificationLikelihood(
        labels,
        num_classes=NUM_CLASSES,
        alpha_epsilon=alpha_epsilon,
        learn_additional_noise=learn_additional_noise,
        dtype=x.dtype,
    )
    base = rff_factory() if kernel == "rff" else (lambda batch_shape: RBFKernel(batch_shape=batch_shape))
    model = DirichletGPModel(x, likelihood, base).to(device=x.device, dtype=x.dtype)
    # Distinct per-class hyperparameters so that every factor shows up in the comparisons.
    batch = likelihood.class_batch_shape
    model.covar_module.outputscale = torch.linspace(0.8, 2.0, batch.numel(), dtype=x.dtype).view(batch).to(x.device)
    lengthscale = torch.linspace(0.2, 0.5, batch.numel(), dtype=x.dtype).view(*batch, 1, 1)
    model.covar_module.base_kernel.lengthscale = lengthscale.to(x.device)
    model.mean_module.constant.data.copy_(torch.linspace(-1.0, 0.5, batch.numel(), dtype=x.dtype).view(batch))
    return model.eval()


def dense_prediction(model, train_x, test_x):
    """Function-space GP formulas with the heteroscedastic per-class noise, dense N x N solves in float64."""
    kernel, likelihood = model.covar_module, model.likelihood
    with torch.no_grad():
        x1, x2 = model.class_inputs(train_x), model.class_inputs(test_x)
        k_train = kernel(x1).to_dense().double()
        k_cross = kernel(x2, x1).to_dense().double()
        k_test = kernel(x2).to_dense().double()
        mean_train, mean_test = model.mean_module(x1).double(), model.mean_module(x2).double()
        noise = likelihood.noise.double()
        system = k_train + torch.diag_embed(noise)
        residual = (likelihood.transformed_targets.double() - mean_train).unsqueeze(-1)
        mean = mean_test + (k_cross @ torch.linalg.solve(system, residual)).squeeze(-1)
        var = (k_test - k_cross @ torch.linalg.solve(system, k_cross.mT)).diagonal(dim1=-2, dim2=-1)
    return mean, var
