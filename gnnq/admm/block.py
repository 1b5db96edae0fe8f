"""The layers one rank owns in pdADMM-G, their variables, and one ADMM iteration over them.

Layers 1..L are split into contiguous blocks, one per rank (``gnnq.admm.partition``). Layer l holds W_l, b_l, z_l, its
input p_l (layer 1's input is the data) and, below the top, its output q_l and the dual u_l
of p_{l+1} = q_l. Per layer the iteration is (k -> k+1), every step closed form or one
linearized proximal step (``gnnq.admm.updates``):

    p_l  <- p-step with q_{l-1}^k, u_{l-1}^k        (l >= 2; projected on the grid under -Q)
    W_l  <- W-step with p_l^{k+1};  b_l <- argmin;  z_l <- closed form / FISTA (top layer)
    q_l  <- closed form with p_{l+1}^{k+1}           (l < L; optionally projected)
    u_l  <- u_l + rho (p_{l+1}^{k+1} - q_l^{k+1})

A layer reads only its neighbours' values, the same ones whichever rank owns the neighbour,
so any number of ranks computes what one rank computes. Across a block boundary the values
travel through ``NeighbourLinks``; inside a block they are read directly.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gnnq.admm import updates


@dataclass(frozen=True)
class StepRule:
    """Backtracking of the linearized p- and W-steps: where the search for t starts and how long it
    may grow. gnnq's default starts at half the last accepted t (so steps follow the curvature);
    the authors' code starts every search at t = 20 and gives up after 11 tries
    (``parallel.step_start=20 parallel.max_backtracks=11``)."""

    t_start: float | None = None  # None: half the last accepted t
    max_backtracks: int = 30

    def start(self, last: float) -> float:
        return last / 2 if self.t_start is None else self.t_start


@dataclass
class Layer:
    index: int  # 1-based
    W: torch.Tensor  # (d_in, d_out)
    b: torch.Tensor  # (d_out,)
    z: torch.Tensor  # (n, d_out)
    p: torch.Tensor | None  # (n, d_in) input; None for layer 1 (the data)
    q: torch.Tensor | None  # (n, d_out) output; None for the top layer
    u: torch.Tensor | None  # dual of p_{l+1} = q_l; None for the top layer
    t_p: float = 1.0  # last accepted backtracking constants (the next search starts just below)
    t_w: float = 1.0


HIDDEN_INITS = ("he", "identity")


def _initial_network(
    x: torch.Tensor, dims: list[int], seed: int, hidden_init: str, first: tuple[torch.Tensor, torch.Tensor] | None
):
    """Yield the layers of the initial network in order (see ``initial_layers``)."""
    gen = torch.Generator().manual_seed(seed)
    h = x
    top = len(dims) - 1
    for i in range(1, top + 1):
        d_in, d_out = dims[i - 1], dims[i]
        W = (torch.randn(d_in, d_out, generator=gen) * math.sqrt(2.0 / d_in)).to(
            x.device
        )  # drawn for every layer alike
        b = torch.zeros(d_out, device=x.device)
        if i == 1 and first is not None:
            W, b = first
        elif hidden_init == "identity" and 1 < i < top and d_in == d_out:
            W = torch.eye(d_in, device=x.device)
        z = h @ W + b
        q = F.relu(z) if i < top else None
        yield Layer(i, W, b, z, None if i == 1 else h, q, None if q is None else torch.zeros_like(q))
        h = q


def initial_layers(
    x: torch.Tensor,
    dims: list[int],
    seed: int,
    hidden_init: str = "he",
    first: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[Layer]:
    """Every layer of the network, identical on every rank, with p, z, q from one forward pass
    over the training rows (so every constraint starts satisfied) and u = 0.

    W is He-normal and b zero, except: ``hidden_init="identity"`` starts every square
    hidden-to-hidden layer at the identity (a deep ReLU network then starts as a shallow one),
    and ``first`` = (W_1, b_1) replaces the first layer (see ``warm_start``).
    """
    return list(_initial_network(x, dims, seed, hidden_init, first))


def initial_block(
    x: torch.Tensor,
    y: torch.Tensor,
    dims: list[int],
    seed: int,
    keep: range,
    hidden_init: str = "he",
    first: tuple[torch.Tensor, torch.Tensor] | None = None,
    p_grid=None,
    q_grid=None,
    network: list[Layer] | None = None,
    steps: StepRule = StepRule(),
) -> "LayerBlock":
    """The block of layers ``keep`` of ``initial_layers`` (or of ``network``, every layer of a
    given start) with its neighbour values; the other layers' variables are dropped as the
    forward pass goes, so a rank never holds them all."""
    num_layers = len(dims) - 1
    kept, q_below, u_below, p_above = [], None, None, None
    for layer in network if network is not None else _initial_network(x, dims, seed, hidden_init, first):
        if layer.index in keep:
            kept.append(layer)
        elif layer.index == keep.start - 1:
            q_below, u_below = layer.q, layer.u
        elif layer.index == keep.stop:
            p_above = layer.p
            break
    block = LayerBlock(kept, num_layers, x, y, p_grid, q_grid, steps)
    block.q_below, block.u_below, block.p_above = q_below, u_below, p_above
    return block


@dataclass(frozen=True)
class Penalties:
    rho: float
    nu: float
    mu: float  # weight decay on ||W||^2


class LayerBlock:
    """One rank's layers and the neighbour values it reads (ghosts)."""

    def __init__(
        self,
        layers: list[Layer],
        num_layers: int,
        x: torch.Tensor,
        y: torch.Tensor,
        p_grid=None,
        q_grid=None,
        steps: StepRule = StepRule(),
    ):
        self.layers, self.L, self.x, self.y, self.steps = layers, num_layers, x, y, steps
        self.project_p = p_grid.project if p_grid is not None else None
        self.project_q = q_grid.project if q_grid is not None else None
        first, last = layers[0].index, layers[-1].index
        self.first, self.last = first, last
        # Ghosts: q_{first-1} and a replica of u_{first-1} (both ends update it identically),
        # and p_{last+1}. Filled from the initial network (``initial_block``).
        self.q_below: torch.Tensor | None = None
        self.u_below: torch.Tensor | None = None
        self.p_above: torch.Tensor | None = None

    GHOSTS = ("q_below", "u_below", "p_above")
    z_out = "gnnq"  # parallel.z_out: gnnq | authors (updates.update_z_out / update_z_out_authors)
    z_pick = "gnnq"  # parallel.z_pick: gnnq | authors (updates.update_z_hidden's pick)

    def state_dict(self) -> dict:
        """Every variable of this block's layers and its ghosts (tensors, floats and None only)."""
        return {
            "layers": [dataclasses.asdict(layer) for layer in self.layers],
            **{k: getattr(self, k) for k in self.GHOSTS},
        }

    def load_state_dict(self, state: dict) -> None:
        device = self.x.device
        moved = [{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in e.items()} for e in state["layers"]]
        if [e["index"] for e in moved] != [layer.index for layer in self.layers]:
            raise ValueError(
                f"the checkpoint holds layers {[e['index'] for e in moved]}, this rank's block is "
                f"{self.first}..{self.last}"
            )
        self.layers = [Layer(**e) for e in moved]
        for k in self.GHOSTS:
            setattr(self, k, None if state[k] is None else state[k].to(device))

    def input_of(self, layer: Layer) -> torch.Tensor:
        return self.x if layer.p is None else layer.p

    def below(self, layer: Layer) -> tuple[torch.Tensor, torch.Tensor]:
        """q_{l-1} and u_{l-1}."""
        if layer.index == self.first:
            return self.q_below, self.u_below
        prev = self.layers[layer.index - 1 - self.first]
        return prev.q, prev.u

    def p_next(self, layer: Layer) -> torch.Tensor:
        if layer.index == self.last:
            return self.p_above
        return self.layers[layer.index + 1 - self.first].p

    def step_p(self, pen: Penalties, layers: list[Layer] | None = None) -> None:
        """The p-steps of ``layers`` (default: all of this block's; each reads only its own layer and
        the one below, so any order or subset computes the same values)."""
        for layer in self.layers if layers is None else layers:
            if layer.p is None:
                continue
            q_prev, u_prev = self.below(layer)
            layer.p, layer.t_p = updates.update_p(
                layer.p,
                layer.W,
                layer.b,
                layer.z,
                q_prev,
                u_prev,
                pen.rho,
                pen.nu,
                t0=self.steps.start(layer.t_p),
                max_backtracks=self.steps.max_backtracks,
                project=self.project_p,
            )

    def step_wbz(self, pen: Penalties) -> None:
        for layer in self.layers:
            p = self.input_of(layer)
            layer.W, layer.t_w = updates.update_W(
                p,
                layer.W,
                layer.b,
                layer.z,
                pen.nu,
                pen.mu,
                t0=self.steps.start(layer.t_w),
                max_backtracks=self.steps.max_backtracks,
            )
            layer.b = updates.update_b(p, layer.W, layer.z)
            a = p @ layer.W + layer.b
            if layer.index < self.L:
                layer.z = updates.update_z_hidden(a, layer.q, layer.z, self.z_pick)
            elif self.z_out == "authors":
                layer.z = updates.update_z_out_authors(layer.z, a, self.y, pen.nu)
            else:
                layer.z = updates.update_z_out(layer.z, a, self.y, pen.nu)

    def step_qu(self, pen: Penalties) -> None:
        """Needs p_above (p_{last+1}^{k+1}) when this block is not the top."""
        for layer in self.layers:
            if layer.q is None:
                continue
            p_next = self.p_next(layer)
            layer.q = updates.update_q(p_next, layer.z, layer.u, pen.rho, pen.nu, project=self.project_q)
            layer.u = updates.update_u(layer.u, p_next, layer.q, pen.rho)

    def receive_q_below(self, q: torch.Tensor, pen: Penalties) -> None:
        """q_{first-1}^{k+1} from the rank below; update the replica of u_{first-1} as that rank did."""
        self.q_below = q
        self.u_below = updates.update_u(self.u_below, self.layers[0].p, q, pen.rho)

    def local_terms(self, pen: Penalties) -> torch.Tensor:
        """This block's share of [objective, residual sum ||p_{l+1} - q_l||^2] (float64)."""
        obj = torch.zeros((), dtype=torch.float64, device=self.x.device)
        res = torch.zeros((), dtype=torch.float64, device=self.x.device)
        for layer in self.layers:
            p = self.input_of(layer)
            fit = layer.z - p @ layer.W - layer.b
            obj += pen.nu / 2 * fit.double().square().sum() + pen.mu / 2 * layer.W.double().square().sum()
            if layer.q is None:
                obj += F.cross_entropy(layer.z, self.y, reduction="sum").double()
                continue
            gap = self.p_next(layer) - layer.q
            obj += pen.nu / 2 * (layer.q - F.relu(layer.z)).double().square().sum()
            obj += (layer.u * gap).double().sum() + pen.rho / 2 * gap.double().square().sum()
            res += gap.double().square().sum()
        return torch.stack([obj, res])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """This block's layers applied to ``h`` (evaluation: the trained network, no ADMM variables)."""
        for layer in self.layers:
            h = h @ layer.W + layer.b
            if layer.index < self.L:
                h = F.relu(h)
        return h


def warm_start(x: torch.Tensor, y: torch.Tensor, dims: list[int], seed: int, pen: Penalties, iterations: int):
    """(W_1, b_1) of a 2-layer network [dims[0] -> dims[1] -> classes] trained by ``iterations``
    ADMM iterations: how the authors' code starts deep networks (a trained shallow network
    with identity layers inserted). Every rank computes it alike, so nothing is sent."""
    shallow = [dims[0], dims[1], dims[-1]]
    block = LayerBlock(initial_layers(x, shallow, seed), 2, x, y)
    for _ in range(iterations):
        block.step_p(pen)
        block.step_wbz(pen)
        block.step_qu(pen)
    return block.layers[0].W, block.layers[0].b
