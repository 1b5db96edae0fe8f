"""Per-layer subproblem updates of pdADMM-G (pure tensor functions, no communication).

Reference: J. Wang, H. Li, Z. Chai, Y. Wang, Y. Cheng, L. Zhao, "Towards Quantized Model Parallelism for
Graph-Augmented MLPs Based on Gradient-Free ADMM Framework", IEEE TNNLS, 2022.

Layout convention: samples are rows. For layer l, ``p`` (n, d_in) is the layer input, ``W`` (d_in, d_out),
``b`` (d_out,), ``z`` (n, d_out) the pre-activation, ``q`` (n, d_out) the layer output and ``u`` (n, d_out)
the dual of the constraint p_{l+1} = q_l. The activation f is ReLU and the affine map is a(p) = p @ W + b.

The problem over L layers is

    R(z_L; y) + (nu/2) sum_l ||z_l - p_l W_l - b_l||^2 + (nu/2) sum_{l<L} ||q_l - f(z_l)||^2
    + sum_{l<L} [<u_l, p_{l+1} - q_l> + (rho/2) ||p_{l+1} - q_l||^2] + (mu/2) sum_l ||W_l||^2

with R the summed softmax cross-entropy over the rows. rho and nu are independent penalties.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

Projection = Callable[[Tensor], Tensor]


def _sq(x: Tensor) -> Tensor:
    return torch.sum(x * x)


def p_objective(
    p: Tensor, W: Tensor, b: Tensor, z: Tensor, q_prev: Tensor, u_prev: Tensor, rho: float, nu: float
) -> Tensor:
    """(nu/2)||z - pW - b||^2 + <u_prev, p - q_prev> + (rho/2)||p - q_prev||^2."""
    d = p - q_prev
    return 0.5 * nu * _sq(z - p @ W - b) + torch.sum(u_prev * d) + 0.5 * rho * _sq(d)


def p_grad(p: Tensor, W: Tensor, b: Tensor, z: Tensor, q_prev: Tensor, u_prev: Tensor, rho: float, nu: float) -> Tensor:
    """Closed-form gradient of :func:`p_objective` with respect to p."""
    return -nu * (z - p @ W - b) @ W.T + u_prev + rho * (p - q_prev)


def w_objective(p: Tensor, W: Tensor, b: Tensor, z: Tensor, nu: float, mu: float) -> Tensor:
    """(nu/2)||z - pW - b||^2 + (mu/2)||W||^2."""
    return 0.5 * nu * _sq(z - p @ W - b) + 0.5 * mu * _sq(W)


def w_grad(p: Tensor, W: Tensor, b: Tensor, z: Tensor, nu: float, mu: float) -> Tensor:
    """Closed-form gradient of :func:`w_objective` with respect to W."""
    return -nu * p.T @ (z - p @ W - b) + mu * W


def _backtrack(
    x: Tensor,
    objective: Callable[[Tensor], Tensor],
    g: Tensor,
    t0: float,
    growth: float,
    max_backtracks: int,
    project: Projection | None,
) -> tuple[Tensor, float]:
    """Linearized proximal step x - g/t, growing t until the quadratic upper bound holds at the candidate.

    Returns (x, t0) when no t within max_backtracks is accepted (only non-finite values get
    there), so the next search does not start from the largest t tried.
    """
    f0 = objective(x).item()
    t = float(t0)
    for attempt in range(max_backtracks):
        if attempt:
            t *= growth
        c = x - g / t
        if project is not None:
            c = project(c)
        d = c - x
        fc = objective(c).item()
        bound = f0 + torch.sum(g * d).item() + 0.5 * t * _sq(d).item()
        # The bound is <= f0 without projection (and with an exact projection when x is feasible), but an
        # off-grid x or fp32 rounding can break that, so monotonicity is enforced explicitly.
        if fc <= bound and fc <= f0:
            return c, t
    return x, float(t0)


@torch.no_grad()
def update_p(
    p: Tensor,
    W: Tensor,
    b: Tensor,
    z: Tensor,
    q_prev: Tensor,
    u_prev: Tensor,
    rho: float,
    nu: float,
    *,
    t0: float = 1.0,
    growth: float = 2.0,
    max_backtracks: int = 30,
    project: Projection | None = None,
) -> tuple[Tensor, float]:
    """One backtracking linearized step on :func:`p_objective`; optional projection (e.g. onto a grid).

    Returns (new p, accepted t); p is returned unchanged if no t is accepted within ``max_backtracks``.
    """
    g = p_grad(p, W, b, z, q_prev, u_prev, rho, nu)
    return _backtrack(
        p, lambda x: p_objective(x, W, b, z, q_prev, u_prev, rho, nu), g, t0, growth, max_backtracks, project
    )


@torch.no_grad()
def update_W(
    p: Tensor,
    W: Tensor,
    b: Tensor,
    z: Tensor,
    nu: float,
    mu: float,
    *,
    t0: float = 1.0,
    growth: float = 2.0,
    max_backtracks: int = 30,
) -> tuple[Tensor, float]:
    """One backtracking linearized step on :func:`w_objective`. Returns (new W, accepted t)."""
    g = w_grad(p, W, b, z, nu, mu)
    return _backtrack(W, lambda x: w_objective(p, x, b, z, nu, mu), g, t0, growth, max_backtracks, None)


@torch.no_grad()
def update_b(p: Tensor, W: Tensor, z: Tensor) -> Tensor:
    """Exact argmin over b of ||z - pW - b||^2: the column mean of z - pW."""
    return (z - p @ W).mean(dim=0)


def _z_hidden_terms(z: Tensor, a: Tensor, q: Tensor, z_old: Tensor | None) -> Tensor:
    terms = (z - a) ** 2 + (q - torch.relu(z)) ** 2
    return terms if z_old is None else terms + (z - z_old) ** 2


def z_hidden_objective(z: Tensor, a: Tensor, q: Tensor, z_old: Tensor, nu: float) -> Tensor:
    """(nu/2)||z - a||^2 + (nu/2)||q - relu(z)||^2 + (nu/2)||z - z_old||^2, summed over elements."""
    return 0.5 * nu * torch.sum(_z_hidden_terms(z, a, q, z_old))


@torch.no_grad()
def update_z_hidden(a: Tensor, q: Tensor, z_old: Tensor, pick: str = "gnnq") -> Tensor:
    """Elementwise global minimizer of :func:`z_hidden_objective` (independent of nu); a = pW + b.

    pick="authors" compares the two candidates without the (z - z_old)^2 term, as the authors'
    pdADMM_G_serial/common.py update_z does (parallel.z_pick); gnnq's "gnnq" compares the full objective.
    """
    z1 = torch.clamp((a + z_old) / 2, max=0.0)
    z2 = torch.clamp((a + z_old + q) / 3, min=0.0)
    old = None if pick == "authors" else z_old
    f1 = _z_hidden_terms(z1, a, q, old)
    f2 = _z_hidden_terms(z2, a, q, old)
    return torch.where(f2 < f1, z2, z1)


def z_out_objective(z: Tensor, a: Tensor, y: Tensor, nu: float) -> Tensor:
    """Summed softmax cross-entropy of z against int64 labels y, plus (nu/2)||z - a||^2."""
    return F.cross_entropy(z, y, reduction="sum") + 0.5 * nu * _sq(z - a)


def z_out_grad(z: Tensor, a: Tensor, y: Tensor, nu: float) -> Tensor:
    """Closed-form gradient of :func:`z_out_objective`: softmax(z) - onehot(y) + nu (z - a)."""
    g = torch.softmax(z, dim=1)
    g[torch.arange(z.shape[0]), y] -= 1.0
    return g + nu * (z - a)


@torch.no_grad()
def update_z_out(z: Tensor, a: Tensor, y: Tensor, nu: float, *, iters: int = 50, tol: float = 1e-6) -> Tensor:
    """FISTA on :func:`z_out_objective` from z; returns the best iterate (never worse than z).

    Stops after ``iters`` steps or when the objective changes by less than tol * max(1, |f|).
    """
    # Per row the CE Hessian is diag(s) - s s^T; v^T H v = Var_s(v) <= (max v - min v)^2 / 4 <= ||v||^2 / 2
    # (Popoviciu), so the gradient is (1/2 + nu)-Lipschitz.
    step = 1.0 / (0.5 + nu)
    x_prev = z
    yk = z
    t = 1.0
    best, best_f = z, z_out_objective(z, a, y, nu).item()
    f_prev = best_f
    for _ in range(iters):
        x = yk - step * z_out_grad(yk, a, y, nu)
        fx = z_out_objective(x, a, y, nu).item()
        if fx < best_f:
            best, best_f = x, fx
        if abs(fx - f_prev) < tol * max(1.0, abs(fx)):
            break
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        yk = x + ((t - 1.0) / t_next) * (x - x_prev)
        x_prev, f_prev, t = x, fx, t_next
    return best


@torch.no_grad()
def update_z_out_authors(
    z: Tensor, a: Tensor, y: Tensor, nu: float, *, iters: int = 50, eta: float = 4.0, tol: float = 1e-3
) -> Tensor:
    """The authors' output-layer z step (pdADMM_G_serial/common.py update_zl; parallel.z_out=authors).

    Accelerated proximal steps of size eta on the cross-entropy (the nu/2 ||z - a||^2 term solved exactly),
    stopping when the objective at the current point changes by less than tol (absolute), and returning
    the last extrapolated point, not the best one.
    """
    f = math.inf
    lam = 1.0
    zeta = z
    for _ in range(iters):
        f_old = f
        f = z_out_objective(z, a, y, nu).item()
        if abs(f - f_old) < tol:
            break
        lam_old = lam
        lam = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * lam * lam))
        gamma = (1.0 - lam_old) / lam
        g = torch.softmax(z, dim=1)
        g[torch.arange(z.shape[0]), y] -= 1.0
        zeta_old = zeta
        zeta = (nu * a + (z - eta * g) / eta) / (nu + 1.0 / eta)
        z = (1.0 - gamma) * zeta + gamma * zeta_old
    return z


def q_objective(q: Tensor, p_next: Tensor, z: Tensor, u: Tensor, rho: float, nu: float) -> Tensor:
    """(nu/2)||q - relu(z)||^2 + <u, p_next - q> + (rho/2)||p_next - q||^2."""
    d = p_next - q
    return 0.5 * nu * _sq(q - torch.relu(z)) + torch.sum(u * d) + 0.5 * rho * _sq(d)


@torch.no_grad()
def update_q(
    p_next: Tensor, z: Tensor, u: Tensor, rho: float, nu: float, *, project: Projection | None = None
) -> Tensor:
    """Exact argmin of :func:`q_objective`, then ``project`` if given."""
    q = (rho * p_next + u + nu * torch.relu(z)) / (rho + nu)
    return project(q) if project is not None else q


@torch.no_grad()
def update_u(u: Tensor, p_next: Tensor, q: Tensor, rho: float) -> Tensor:
    """Dual ascent step u + rho (p_next - q)."""
    return u + rho * (p_next - q)
