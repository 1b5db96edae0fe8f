"""pdADMM-G's published behaviours as named options (issue 28 item 5): parallel.z_out, parallel.z_pick."""

from __future__ import annotations

import math

import pytest
import torch

from gnnq.admm import updates
from gnnq.config.compose import compose_config
from gnnq.errors import ConfigError


def test_z_pick_authors_drops_the_z_old_term():
    # one element: a = 1, q = 0, z_old = -3. Candidates z1 = min((1 - 3)/2, 0) = -1, z2 = max((1 - 3 + 0)/3, 0) = 0.
    # with (z - z_old)^2: f1 = 4 + 0 + 4 = 8, f2 = 1 + 0 + 9 = 10 -> z1 = -1.
    # without it:         f1 = 4,             f2 = 1             -> z2 = 0.
    a, q, z_old = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([-3.0])
    assert updates.update_z_hidden(a, q, z_old).item() == -1.0
    assert updates.update_z_hidden(a, q, z_old, "gnnq").item() == -1.0
    assert updates.update_z_hidden(a, q, z_old, "authors").item() == 0.0


def _hand_authors_z_out(z, a, y, nu):
    """The iteration written out by hand: eta 4, absolute tolerance 1e-3, last extrapolated point."""
    eta, f, lam, zeta = 4.0, math.inf, 1.0, z.clone()
    for _ in range(50):
        f_old = f
        ce = -sum(math.log(math.exp(z[i, y[i]]) / sum(math.exp(v) for v in z[i])) for i in range(z.shape[0]))
        f = ce + 0.5 * nu * float(((z - a) ** 2).sum())
        if abs(f - f_old) < 1e-3:
            break
        lam_old, lam = lam, (1 + math.sqrt(1 + 4 * lam * lam)) / 2
        gamma = (1 - lam_old) / lam
        g = torch.exp(z) / torch.exp(z).sum(dim=1, keepdim=True)
        for i in range(z.shape[0]):
            g[i, y[i]] -= 1.0
        zeta_old = zeta
        zeta = (nu * a + (z - eta * g) / eta) / (nu + 1 / eta)
        z = (1 - gamma) * zeta + gamma * zeta_old
    return z


def test_z_out_authors_matches_a_hand_run():
    torch.manual_seed(0)
    z, a = torch.randn(3, 2, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    y = torch.tensor([0, 1, 1])
    for nu in (1e-3, 1.0):
        got = updates.update_z_out_authors(z, a, y, nu)
        assert torch.allclose(got, _hand_authors_z_out(z, a, y, nu), atol=1e-12)
        # not gnnq's step (best iterate of FISTA with step 1/(1/2 + nu))
        assert not torch.allclose(got, updates.update_z_out(z, a, y, nu), atol=1e-6)


@pytest.mark.parametrize("preset", ["pdadmm_g_paper", "pdadmm_g_q_paper", "pdadmm_g_q_code"])
def test_paper_presets_use_the_authors_options(preset):
    cfg = compose_config([f"experiment={preset}"])
    assert cfg.parallel.z_out == "authors" and cfg.parallel.z_pick == "authors"


@pytest.mark.parametrize("preset", ["pdadmm_g", "pdadmm_g_q_gnnq"])
def test_gnnq_presets_keep_gnnq_behaviour(preset):
    cfg = compose_config([f"experiment={preset}"])
    assert cfg.parallel.z_out == "gnnq" and cfg.parallel.z_pick == "gnnq"


def test_bad_value_is_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        compose_config(["experiment=pdadmm_g_paper", "parallel.z_out=nope"])
    msg = str(e.value)
    assert "\n" not in msg and "parallel.z_out" in msg and "authors" in msg and "gnnq" in msg


def _chain_q(quantize: bool):
    from gnnq.admm.chain import Published, Stage, chain_network
    from gnnq.comm.grid_codec import Grid

    torch.manual_seed(1)
    x, y = torch.randn(12, 4), torch.randint(0, 3, (12,))
    grid = Grid(-1.0, 2.0, 7)
    published = Published(q_grid=grid if quantize else None)
    net = chain_network(x, y, [4, 5, 5, 3], 0, [Stage(2, 3, 1e-2, 0.1)], 1.0, published=published)
    return net[0].q, grid  # layer 1's q as the 2-layer stage left it


@pytest.mark.parametrize("quantize", [True, False])
def test_quantized_chain_leaves_q_on_the_grid(quantize):
    q, grid = _chain_q(quantize)
    on_grid = torch.allclose(grid.project(q), q)
    assert on_grid == quantize


@pytest.mark.parametrize("preset", ["pdadmm_g_q_paper", "pdadmm_g_q_code"])
def test_q_paper_presets_run_the_authors_q_chain(preset):
    cfg = compose_config([f"experiment={preset}"])
    assert cfg.parallel.chain_quantize and list(cfg.parallel.chain_iterations) == [200, 200]
    assert cfg.parallel.chain_stall_tol == 0.01
    assert not compose_config(["experiment=pdadmm_g_q_gnnq"]).parallel.chain_quantize


def test_stall_tolerance_is_the_schedules():
    from gnnq.admm.schedule import RhoSchedule

    loose, strict = RhoSchedule(1e-3, "paper", 1.0, tol=0.01), RhoSchedule(1e-3, "paper", 1.0)
    for loss in (1.0, 0.995, 0.99, 0.985):  # falls by 0.005 each time: a stall only under tol 0.01
        loose.after(loss)
        strict.after(loss)
    assert loose.rho == pytest.approx(1e-2) and strict.rho == pytest.approx(1e-3)
