"""pdADMM-G's published behaviours as named options (issue 28 item 5): parallel.z_out, parallel.z_pick, the authors'
Q chain (chain_quantize, chain_iterations, chain_mu, chain_stall_tol per stage) and rho_schedule=paper_q."""

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


def test_quantized_chain_quantizes_q_in_every_stage():
    # two stages (2 then 3 layers), as the authors' 2- and 5-layer Q scripts: the kept layers' q are grid values
    from gnnq.admm.chain import Published, Stage, chain_network
    from gnnq.comm.grid_codec import Grid

    torch.manual_seed(1)
    x, y = torch.randn(12, 4), torch.randint(0, 3, (12,))
    grid = Grid(-1.0, 2.0, 7)
    net = chain_network(
        x, y, [4, 5, 5, 5, 3], 0, [Stage(2, 2, 1e-2, 0.1), Stage(3, 2, 1e-2, 0.1)], 1.0, published=Published(grid)
    )
    for layer in net[:2]:  # layer 1 from both stages, layer 2 from the 3-layer stage
        assert torch.equal(grid.project(layer.q), layer.q)
        assert not torch.equal(layer.q, torch.relu(layer.z))  # not just relu(z) landing on the grid


@pytest.mark.parametrize("preset", ["pdadmm_g_q_paper", "pdadmm_g_q_code"])
def test_q_paper_presets_run_the_authors_q_chain(preset):
    # pdADMM_G_Q_2_layer.py / _5_layer.py / _10_layer.py on Cora: 200 + 200 iterations, mu 10 then 0.01, stall
    # tolerance 1e-3 then 0.01, q quantized in both stages; the full network under the Q script's rho windows
    p = compose_config([f"experiment={preset}"]).parallel
    assert p.chain_quantize and list(p.chain_iterations) == [200, 200] and list(p.chain_mu) == [10.0, 0.01]
    assert list(p.chain_stall_tol) == [0.001, 0.01] and p.rho_schedule == "paper_q"


@pytest.mark.parametrize("preset", ["pdadmm_g", "pdadmm_g_q_gnnq", "pdadmm_g_paper"])
def test_other_presets_keep_the_unquantized_chain_and_their_schedule(preset):
    p = compose_config([f"experiment={preset}"]).parallel
    assert not p.chain_quantize and p.chain_stall_tol is None and list(p.chain_iterations) == [200, 10]
    assert p.rho_schedule == ("paper" if preset == "pdadmm_g_paper" else "none")


def test_chain_stages_take_one_stall_tolerance_each(monkeypatch):
    from gnnq.admm import chain

    seen = []

    class Recording(chain.RhoSchedule):
        def __init__(self, rho, mode, cap, tol):
            seen.append((rho, mode, cap, tol))
            super().__init__(rho, mode, cap, tol)

    monkeypatch.setattr(chain, "RhoSchedule", Recording)
    torch.manual_seed(1)
    x, y = torch.randn(12, 4), torch.randint(0, 3, (12,))
    stages = [chain.Stage(2, 1, 1e-2, 0.1, 1e-3), chain.Stage(3, 1, 1e-3, 0.1, 0.01)]
    chain.chain_network(x, y, [4, 5, 5, 5, 3], 0, stages, 1.0)
    assert seen == [(1e-2, "paper", 1.0, 1e-3), (1e-3, "paper", 1.0, 0.01)]
    # from the config: the Q presets' list, and null -> 1e-3 in every stage
    q = chain.chain_stages(compose_config(["experiment=pdadmm_g_q_code"]).parallel)
    assert [s.stall_tol for s in q] == [0.001, 0.01]
    assert [s.stall_tol for s in chain.chain_stages(compose_config(["experiment=pdadmm_g_paper"]).parallel)] == [
        1e-3,
        1e-3,
    ]


def test_chain_stall_tol_needs_one_value_per_stage():
    with pytest.raises(ConfigError) as e:
        compose_config(["experiment=pdadmm_g_q_code", "parallel.chain_stall_tol=[0.01]"])
    msg = str(e.value)
    assert "\n" not in msg and "parallel.chain_stall_tol" in msg and "per stage" in msg


def _hand_q_rule(losses, rho):
    """pdADMM_G_Q_10_layer.py's rule written out: i is the 0-based iteration."""
    out = []
    for i in range(len(losses)):
        if 20 < i < 50 and losses[i] > losses[i - 1] - 0.001 and losses[i - 1] > losses[i - 2]:
            rho = min(10 * rho, 0.01)
        if i > 50 and losses[i] > losses[i - 1] - 0.001 and losses[i - 1] > losses[i - 2]:
            rho = min(10 * rho, 1e-3)
        out.append(rho)
    return out


def _schedule_trace(mode, losses, rho=1e-4):
    from gnnq.admm.schedule import RhoSchedule

    s, out = RhoSchedule(rho, mode, 1.0), []
    for loss in losses:
        s.after(loss)
        out.append(s.rho)
    return out


def test_paper_q_schedule_matches_the_q_script():
    rising = [1.0 + 0.001 * i for i in range(80)]  # every iteration a stall with the loss before it rising
    got = _schedule_trace("paper_q", rising)
    assert got == pytest.approx(_hand_q_rule(rising, 1e-4))
    # by hand: 1e-4 until i = 20, x10 at i = 21 and 22, capped at 1e-2 to i = 49, untouched at i = 50,
    # lowered to the second cap 1e-3 at i = 51
    assert got[20] == pytest.approx(1e-4) and got[21] == pytest.approx(1e-3) and got[22] == pytest.approx(1e-2)
    assert got[50] == pytest.approx(1e-2) and got[51] == pytest.approx(1e-3) and got[-1] == pytest.approx(1e-3)
    # a loss falling by less than 1e-3 is a stall for rho_schedule=paper, not for the Q script (the loss before
    # it must have risen)
    slow = [1.0 - 0.0005 * i for i in range(80)]
    assert _schedule_trace("paper_q", slow) == pytest.approx([1e-4] * 80) == _hand_q_rule(slow, 1e-4)
    assert _schedule_trace("paper", slow)[-1] == pytest.approx(1.0)


def test_paper_q_schedule_resumes_at_its_iteration():
    from gnnq.admm.schedule import RhoSchedule

    rising = [1.0 + 0.001 * i for i in range(60)]
    a = RhoSchedule(1e-4, "paper_q", 1.0)
    for loss in rising[:30]:
        a.after(loss)
    b = RhoSchedule(1e-4, "paper_q", 1.0)
    b.load_state_dict(a.state_dict())
    for loss in rising[30:]:
        a.after(loss)
        b.after(loss)
    assert b.rho == a.rho == pytest.approx(1e-3) and b.count == 60


def test_code_grid_is_the_nearest_of_the_authors_linspace():
    import numpy as np

    from gnnq.comm.grid_codec import Grid

    delta = torch.from_numpy(np.linspace(-1, 2, 1000)).float()  # the Q scripts' delta
    x = torch.linspace(-1.5, 2.5, 4001)
    nearest = delta[torch.argmin((x[None, :] - delta[:, None]).abs(), dim=0)]  # common.update_q_quantize's rule
    assert torch.allclose(Grid(-1.0, 2.0, 1000).project(x), nearest, atol=1e-6)


def test_stall_tolerance_is_the_schedules():
    from gnnq.admm.schedule import RhoSchedule

    loose, strict = RhoSchedule(1e-3, "paper", 1.0, tol=0.01), RhoSchedule(1e-3, "paper", 1.0)
    for loss in (1.0, 0.995, 0.99, 0.985):  # falls by 0.005 each time: a stall only under tol 0.01
        loose.after(loss)
        strict.after(loss)
    assert loose.rho == pytest.approx(1e-2) and strict.rho == pytest.approx(1e-3)
