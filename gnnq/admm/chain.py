"""parallel.init=chain: the start the authors' scripts give a deep pdADMM-G network.

Their 10-layer run starts from a chain of shallower networks, each trained by ADMM from the
previous one (xianggebenben/pdADMM-G, ``pdADMM_G_{2,5,10}_layer.py``): a 2-layer network is
trained, a 5-layer one starts from it, the 10-layer one from the 5-layer one. Between stages:

- layers 1..D-1 of the previous network (all but its output layer) keep W, b, z, q and their
  input p; the duals u start again at 0;
- the new hidden layers start at the identity (b = 0) on the kept network's last q, with
  z = p W + b and q = relu(z), so their constraints hold;
- a stage's output layer starts random (W, b ~ N(0, 0.1^2), z = 0); the full network's output
  layer starts at W = eye (classes x width in the paper's layout), b = 0 and z = +1 on the true
  class, -1 elsewhere.

Every stage runs ``iterations`` ADMM iterations with nu = rho starting at the stage's rho and the
paper's schedule (``gnnq.admm.schedule``, capped at ``rho_max``, with the stage's stall tolerance), and
its own weight decay mu.
Every rank computes the chain alike on the training rows, so nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gnnq.admm.block import Layer, LayerBlock, Penalties, StepRule
from gnnq.admm.schedule import STALL_TOLERANCE, RhoSchedule

INIT_STD = 0.1  # the authors' random layers: N(0, 0.1^2)


@dataclass(frozen=True)
class Stage:
    layers: int  # depth of this stage's network
    iterations: int
    rho: float  # start of rho = nu
    mu: float  # weight decay on ||W||^2
    stall_tol: float = STALL_TOLERANCE  # rho x10 after two iterations whose loss fell by less than this


@dataclass(frozen=True)
class Published:
    """What the chain's stages take from the authors' scripts when the options ask for it."""

    q_grid: object = None  # parallel.chain_quantize: q projected on the grid in every stage (their Q chain)
    z_out: str = "gnnq"  # parallel.z_out
    z_pick: str = "gnnq"  # parallel.z_pick


def chain_published(pcfg, q_grid) -> Published:
    """The chain's published behaviours from ``parallel.*``; q_grid is the run's grid (None in fp32)."""
    return Published(q_grid if pcfg.chain_quantize else None, str(pcfg.z_out), str(pcfg.z_pick))


def chain_stages(pcfg) -> list[Stage]:
    """The stages of ``parallel.chain_*`` (validated: equal lengths, increasing depths)."""
    tols = pcfg.chain_stall_tol or [STALL_TOLERANCE] * len(pcfg.chain_layers)
    return [
        Stage(int(d), int(n), float(r), float(m), float(t))
        for d, n, r, m, t in zip(pcfg.chain_layers, pcfg.chain_iterations, pcfg.chain_rho, pcfg.chain_mu, tols)
    ]


def grown_network(
    x: torch.Tensor,
    y: torch.Tensor,
    width: int,
    classes: int,
    depth: int,
    kept: list[Layer],
    final: bool,
    gen: torch.Generator,
) -> list[Layer]:
    """A ``depth``-layer network: ``kept`` (u reset), identity hidden layers, a new output layer."""
    layers = [Layer(k.index, k.W, k.b, k.z, k.p, k.q, torch.zeros_like(k.q)) for k in kept]
    h = kept[-1].q if kept else x
    n, device = x.shape[0], x.device
    for i in range(len(kept) + 1, depth + 1):
        d_in, d_out = (x.shape[1] if i == 1 else width), (classes if i == depth else width)
        if i == depth and final:
            W, b = torch.eye(d_in, d_out, device=device), torch.zeros(d_out, device=device)
            z = 2.0 * F.one_hot(y, classes).to(x.dtype) - 1.0
        elif i == depth or i == 1:
            W = (torch.randn(d_in, d_out, generator=gen) * INIT_STD).to(device)
            b = (torch.randn(d_out, generator=gen) * INIT_STD).to(device)
            z = torch.zeros(n, d_out, device=device) if i == depth else h @ W + b
        else:
            W, b = torch.eye(d_in, device=device), torch.zeros(d_out, device=device)
            z = h @ W + b
        q = F.relu(z) if i < depth else None
        layers.append(Layer(i, W, b, z, None if i == 1 else h, q, None if q is None else torch.zeros_like(q)))
        h = q
    return layers


def train_loss(block: LayerBlock) -> float:
    """Mean cross-entropy of the network's forward pass on the training rows (what the schedule reads)."""
    return F.cross_entropy(block.forward(block.x), block.y).item()


def run_stage(
    x: torch.Tensor,
    y: torch.Tensor,
    layers: list[Layer],
    stage: Stage,
    rho_max: float,
    steps: StepRule = StepRule(),
    published: Published = Published(),
) -> list[Layer]:
    """``stage.iterations`` serial ADMM iterations of the whole network ``layers``."""
    block = LayerBlock(layers, len(layers), x, y, q_grid=published.q_grid, steps=steps)
    block.z_out, block.z_pick = published.z_out, published.z_pick
    block.q_below = block.u_below = block.p_above = None
    schedule = RhoSchedule(stage.rho, "paper", rho_max, stage.stall_tol)
    for _ in range(stage.iterations):
        pen = Penalties(schedule.rho, schedule.rho, stage.mu)
        block.step_p(pen)
        block.step_wbz(pen)
        block.step_qu(pen)
        schedule.after(train_loss(block))
    return block.layers


def chain_network(
    x: torch.Tensor,
    y: torch.Tensor,
    dims: list[int],
    seed: int,
    stages: list[Stage],
    rho_max: float,
    steps: StepRule = StepRule(),
    published: Published = Published(),
) -> list[Layer]:
    """Every layer of the full network (``dims``) after the chain of ``stages``, identical on every rank."""
    gen = torch.Generator().manual_seed(seed)
    width, classes = dims[1], dims[-1]
    kept: list[Layer] = []
    for stage in stages:
        layers = run_stage(
            x, y, grown_network(x, y, width, classes, stage.layers, kept, False, gen), stage, rho_max, steps, published
        )
        kept = layers[:-1]
    return grown_network(x, y, width, classes, len(dims) - 1, kept, True, gen)
