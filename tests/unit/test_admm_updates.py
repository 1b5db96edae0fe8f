"""pdADMM-G subproblem updates: each step decreases its sub-objective, closed forms are exact minimizers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gnnq.admm.updates import (
    p_grad,
    p_objective,
    q_objective,
    update_b,
    update_p,
    update_q,
    update_u,
    update_W,
    update_z_hidden,
    update_z_out,
    w_grad,
    w_objective,
    z_hidden_objective,
    z_out_grad,
    z_out_objective,
)

N, D_IN, D_OUT, CLASSES = 50, 30, 20, 7
SEEDS = (0, 1, 2)
RHO_NU = ((1.0, 1.0), (0.1, 2.0), (5.0, 0.3))
GRID = lambda x: x.round().clamp(-1, 20)  # noqa: E731


def _rel(x: float) -> float:
    return 1e-6 * max(1.0, abs(x))


def _layer(seed: int, grid: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    if grid:
        p = torch.randint(-1, 21, (N, D_IN), generator=g).float()
        q_prev = torch.randint(-1, 21, (N, D_IN), generator=g).float()
    else:
        p, q_prev = r(N, D_IN), r(N, D_IN)
    return {
        "p": p,
        "W": r(D_IN, D_OUT) / D_IN**0.5,
        "b": r(D_OUT),
        "z": r(N, D_OUT),
        "q_prev": q_prev,
        "u_prev": 0.5 * r(N, D_IN),
    }


def _p_args(v: dict, rho: float, nu: float) -> tuple:
    return v["p"], v["W"], v["b"], v["z"], v["q_prev"], v["u_prev"], rho, nu


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rho,nu", RHO_NU)
def test_update_p_decreases_and_satisfies_bound(seed, rho, nu):
    v = _layer(seed)
    args = _p_args(v, rho, nu)
    f0 = p_objective(*args).item()
    g = p_grad(*args)
    p_new, t = update_p(*args)
    f1 = p_objective(p_new, *args[1:]).item()
    d = p_new - v["p"]
    assert t >= 1.0
    assert d.abs().max() > 0
    assert torch.allclose(p_new, v["p"] - g / t)
    assert f1 <= f0 + torch.sum(g * d).item() + 0.5 * t * torch.sum(d * d).item() + _rel(f0)
    assert f1 <= f0 - torch.sum(g * g).item() / (2 * t) + _rel(f0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rho,nu", RHO_NU)
def test_p_grad_matches_autograd(seed, rho, nu):
    v = _layer(seed)
    p = v["p"].clone().requires_grad_(True)
    p_objective(p, *_p_args(v, rho, nu)[1:]).backward()
    g = p_grad(*_p_args(v, rho, nu))
    assert (g - p.grad).norm() <= 1e-5 * p.grad.norm()


@pytest.mark.parametrize("seed", SEEDS)
def test_update_p_grid_projection(seed):
    v = _layer(seed, grid=True)
    args = _p_args(v, 1.0, 1.0)
    f0 = p_objective(*args).item()
    p_new, t = update_p(*args, project=GRID)
    f1 = p_objective(p_new, *args[1:]).item()
    assert torch.equal(p_new, GRID(p_new))
    assert not torch.equal(p_new, v["p"])
    assert f1 < f0
    d = p_new - v["p"]
    g = p_grad(*args)
    assert f1 <= f0 + torch.sum(g * d).item() + 0.5 * t * torch.sum(d * d).item() + _rel(f0)


def test_update_p_exhausted_backtracking_returns_input():
    v = _layer(0)
    args = _p_args(v, 1.0, 1.0)
    p_new, _ = update_p(*args, t0=1e-6, max_backtracks=2)
    assert torch.equal(p_new, v["p"])
    p_new, t = update_p(*args, t0=1e-6, max_backtracks=40)
    assert not torch.equal(p_new, v["p"]) and t > 1e-6


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("nu,mu", ((1.0, 0.01), (3.0, 1.0)))
def test_update_W_decreases_and_satisfies_bound(seed, nu, mu):
    v = _layer(seed)
    p, W, b, z = v["p"], v["W"], v["b"], v["z"]
    f0 = w_objective(p, W, b, z, nu, mu).item()
    g = w_grad(p, W, b, z, nu, mu)
    W_new, t = update_W(p, W, b, z, nu, mu)
    f1 = w_objective(p, W_new, b, z, nu, mu).item()
    d = W_new - W
    assert d.abs().max() > 0
    assert f1 <= f0 + torch.sum(g * d).item() + 0.5 * t * torch.sum(d * d).item() + _rel(f0)
    assert f1 <= f0 - torch.sum(g * g).item() / (2 * t) + _rel(f0)

    Wg = W.clone().requires_grad_(True)
    w_objective(p, Wg, b, z, nu, mu).backward()
    assert (g - Wg.grad).norm() <= 1e-5 * Wg.grad.norm()


@pytest.mark.parametrize("seed", SEEDS)
def test_update_b_is_exact_minimizer(seed):
    v = _layer(seed)
    p, W, z = v["p"], v["W"], v["z"]
    obj = lambda b: torch.sum((z - p @ W - b) ** 2)  # noqa: E731
    b = update_b(p, W, z).requires_grad_(True)
    f = obj(b)
    f.backward()
    assert b.grad.norm() <= 1e-4 * max(1.0, f.item()) ** 0.5
    g = torch.Generator().manual_seed(seed + 100)
    for _ in range(5):
        delta = 1e-2 * torch.randn(D_OUT, generator=g)
        assert obj(b.detach() + delta).item() > f.item()
    assert obj(b.detach()).item() < obj(v["b"]).item()


def _z_hidden_instance(seed: int, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    a, q, z_old = (scale * torch.randn(N, D_OUT, generator=g) for _ in range(3))
    return a, q, z_old


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("nu", (0.1, 1.0, 10.0))
def test_update_z_hidden_global_min(seed, nu):
    a, q, z_old = _z_hidden_instance(seed)
    z = update_z_hidden(a, q, z_old)
    assert (z < 0).any() and (z > 0).any()
    assert z_hidden_objective(z, a, q, z_old, nu) <= z_hidden_objective(z_old, a, q, z_old, nu)

    grid = torch.linspace(-15.0, 15.0, 2001).view(-1, 1, 1)
    f_grid = 0.5 * nu * ((grid - a) ** 2 + (q - torch.relu(grid)) ** 2 + (grid - z_old) ** 2)
    f_min = f_grid.min(dim=0).values
    f_z = 0.5 * nu * ((z - a) ** 2 + (q - torch.relu(z)) ** 2 + (z - z_old) ** 2)
    assert (f_z <= f_min + 1e-5 * f_min.abs().clamp(min=1.0)).all()
    assert z_hidden_objective(z, a, q, z_old, nu).item() <= f_min.sum().item() + 1e-5 * f_min.sum().item()


def _z_out_instance(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = 2.0 * torch.randn(N, CLASSES, generator=g)
    z = 2.0 * torch.randn(N, CLASSES, generator=g)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    return z, a, y


@pytest.mark.parametrize("seed", SEEDS)
def test_cross_entropy_gradient_is_half_lipschitz(seed):
    # update_z_out's step 1/(1/2 + nu) relies on this bound; adversarial-ish pairs: large logits, small gaps.
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    zero = torch.zeros(N, CLASSES)
    worst = 0.0
    for scale in (0.1, 1.0, 5.0):
        z1 = scale * torch.randn(N, CLASSES, generator=g)
        z2 = z1 + 1e-2 * torch.randn(N, CLASSES, generator=g)
        diff = (z_out_grad(z1, zero, y, 0.0) - z_out_grad(z2, zero, y, 0.0)).norm(dim=1)
        ratio = (diff / (z1 - z2).norm(dim=1)).max().item()
        worst = max(worst, ratio)
    assert worst <= 0.5 + 1e-3
    assert worst > 0.2


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("nu", (0.05, 1.0, 5.0))
def test_update_z_out_converges(seed, nu):
    z, a, y = _z_out_instance(seed)
    f0 = z_out_objective(z, a, y, nu).item()
    z_new = update_z_out(z, a, y, nu)
    assert z_out_objective(z_new, a, y, nu).item() < f0

    z_long = update_z_out(z, a, y, nu, iters=400, tol=0.0)
    assert z_out_objective(z_long, a, y, nu).item() <= z_out_objective(z_new, a, y, nu).item() + _rel(f0)
    assert z_out_grad(z_long, a, y, nu).norm() <= 1e-3 * z_out_grad(z, a, y, nu).norm()


@pytest.mark.parametrize("seed", SEEDS)
def test_z_out_grad_matches_autograd_and_minimizer_is_kept(seed):
    z, a, y = _z_out_instance(seed)
    zg = z.clone().requires_grad_(True)
    z_out_objective(zg, a, y, 0.7).backward()
    assert (z_out_grad(z, a, y, 0.7) - zg.grad).norm() <= 1e-5 * zg.grad.norm()
    z_star = update_z_out(z, a, y, 0.7, iters=400, tol=0.0)
    again = update_z_out(z_star, a, y, 0.7)
    assert z_out_objective(again, a, y, 0.7).item() <= z_out_objective(z_star, a, y, 0.7).item()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rho,nu", RHO_NU)
def test_update_q_is_argmin(seed, rho, nu):
    g = torch.Generator().manual_seed(seed)
    p_next, z, u, q0 = (torch.randn(N, D_OUT, generator=g) for _ in range(4))
    q = update_q(p_next, z, u, rho, nu).requires_grad_(True)
    f = q_objective(q, p_next, z, u, rho, nu)
    f.backward()
    assert q.grad.norm() <= 1e-5 * (rho + nu) * (p_next.norm() + u.norm() + z.norm())
    closed = nu * (q.detach() - torch.relu(z)) - u - rho * (p_next - q.detach())
    assert torch.allclose(closed, q.grad, atol=1e-5)
    assert f.item() < q_objective(q0, p_next, z, u, rho, nu).item()

    qp = update_q(p_next, z, u, rho, nu, project=GRID)
    assert torch.equal(qp, GRID(q.detach()))


def test_update_u():
    g = torch.Generator().manual_seed(0)
    u, p_next, q = (torch.randn(N, D_OUT, generator=g) for _ in range(3))
    assert torch.allclose(update_u(u, p_next, q, 0.3), u + 0.3 * (p_next - q))
    assert torch.equal(update_u(u, q, q, 0.3), u)


def _lagrangian(s: dict, y: torch.Tensor, rho: float, nu: float, mu: float) -> float:
    """Augmented Lagrangian of a 2-layer (1 hidden) network; p1 = X is data."""
    r1 = s["z1"] - s["p1"] @ s["W1"] - s["b1"]
    r2 = s["z2"] - s["p2"] @ s["W2"] - s["b2"]
    c = s["p2"] - s["q1"]
    val = (
        F.cross_entropy(s["z2"], y, reduction="sum")
        + 0.5 * nu * (torch.sum(r1**2) + torch.sum(r2**2) + torch.sum((s["q1"] - torch.relu(s["z1"])) ** 2))
        + torch.sum(s["u1"] * c)
        + 0.5 * rho * torch.sum(c**2)
        + 0.5 * mu * (torch.sum(s["W1"] ** 2) + torch.sum(s["W2"] ** 2))
    )
    return val.item()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rho,nu", RHO_NU)
def test_one_round_never_increases_subobjectives(seed, rho, nu):
    mu = 0.01
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    s = {
        "p1": r(N, D_IN),
        "W1": r(D_IN, D_OUT) / D_IN**0.5,
        "b1": r(D_OUT),
        "z1": r(N, D_OUT),
        "q1": r(N, D_OUT),
        "u1": 0.5 * r(N, D_OUT),
        "p2": r(N, D_OUT),
        "W2": r(D_OUT, CLASSES) / D_OUT**0.5,
        "b2": r(CLASSES),
        "z2": r(N, CLASSES),
    }
    y = torch.randint(0, CLASSES, (N,), generator=g)
    history = [_lagrangian(s, y, rho, nu, mu)]

    def check(before: float, after: float) -> None:
        assert after <= before + _rel(before)
        history.append(_lagrangian(s, y, rho, nu, mu))
        assert history[-1] <= history[-2] + _rel(history[-2])

    before = p_objective(s["p2"], s["W2"], s["b2"], s["z2"], s["q1"], s["u1"], rho, nu).item()
    s["p2"], _ = update_p(s["p2"], s["W2"], s["b2"], s["z2"], s["q1"], s["u1"], rho, nu)
    check(before, p_objective(s["p2"], s["W2"], s["b2"], s["z2"], s["q1"], s["u1"], rho, nu).item())

    for p, W, b, z in (("p1", "W1", "b1", "z1"), ("p2", "W2", "b2", "z2")):
        before = w_objective(s[p], s[W], s[b], s[z], nu, mu).item()
        s[W], _ = update_W(s[p], s[W], s[b], s[z], nu, mu)
        check(before, w_objective(s[p], s[W], s[b], s[z], nu, mu).item())
        before = torch.sum((s[z] - s[p] @ s[W] - s[b]) ** 2).item()
        s[b] = update_b(s[p], s[W], s[z])
        check(before, torch.sum((s[z] - s[p] @ s[W] - s[b]) ** 2).item())

    a1 = s["p1"] @ s["W1"] + s["b1"]
    z_old = s["z1"]
    before = z_hidden_objective(z_old, a1, s["q1"], z_old, nu).item()
    s["z1"] = update_z_hidden(a1, s["q1"], z_old)
    check(before, z_hidden_objective(s["z1"], a1, s["q1"], z_old, nu).item())

    a2 = s["p2"] @ s["W2"] + s["b2"]
    before = z_out_objective(s["z2"], a2, y, nu).item()
    s["z2"] = update_z_out(s["z2"], a2, y, nu)
    check(before, z_out_objective(s["z2"], a2, y, nu).item())

    before = q_objective(s["q1"], s["p2"], s["z1"], s["u1"], rho, nu).item()
    s["q1"] = update_q(s["p2"], s["z1"], s["u1"], rho, nu)
    check(before, q_objective(s["q1"], s["p2"], s["z1"], s["u1"], rho, nu).item())

    assert history[-1] < history[0]
