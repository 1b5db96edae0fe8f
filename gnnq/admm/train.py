"""pdADMM-G / pdADMM-G-Q training: layer blocks on ranks, one ADMM iteration per epoch row.

Every rank holds the GA-MLP inputs of all nodes (one edgeless part) and the layers of its
block. Training uses the labelled training rows only (the paper's setting); evaluation passes
the evaluation rows up the block pipeline. Rows of metrics.jsonl are the usual epoch rows
(an epoch is one iteration) plus ``objective``, ``residual`` and ``rho``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from gnnq.admm.block import Layer, LayerBlock, Penalties, StepRule, initial_block, warm_start
from gnnq.admm.chain import chain_network, chain_published, chain_stages
from gnnq.admm.links import NeighbourLinks, fp32_baselines
from gnnq.admm.partition import split_layers
from gnnq.admm.schedule import RhoSchedule
from gnnq.comm import Communicator
from gnnq.comm.accounting import ADMM_EVAL, ADMM_TRAIN, CONTROL
from gnnq.comm.grid_codec import Grid
from gnnq.config.registry import QUANTIZERS
from gnnq.data.part import Part
from gnnq.errors import ConfigError, GnnqError
from gnnq.train.driver import NUM_COUNTS, RowCategories, Trainer, epoch_trainer
from gnnq.train.metrics import split_counts


def admm_grids(qcfg) -> tuple[Grid | None, Grid | None]:
    """(grid for p, grid for q): both None for pdADMM-G (quantizer=fp32), either None where not quantized."""
    messages = QUANTIZERS.target(qcfg.name).from_config(qcfg, 0, 0)  # quantizer=grid: GridMessages; fp32: None
    return (None, None) if messages is None else (messages.p, messages.q)


class AdmmTrainer(Trainer):
    """pdADMM-G(-Q): every rank iterates its block of layers; an epoch is one iteration."""

    row_categories = RowCategories(train=(ADMM_TRAIN,), eval=(ADMM_EVAL,))
    settles_for_evaluation = False

    def __init__(self, cfg: DictConfig, part: Part, comm: Communicator, device=torch.device("cpu")):
        if part.multilabel:
            raise ConfigError("parallel=admm trains single-label classification; this dataset is multi-label")
        part = part.to(device)
        self.metric, self.device, self.cfg, self.comm = part.metric, device, cfg, comm
        seed = int(
            comm.broadcast(torch.tensor([cfg.trainer.seed], dtype=torch.int64, device=device), category=CONTROL).item()
        )
        m, pcfg = cfg.model, cfg.parallel
        self.dims = [part.x.shape[1]] + [m.hidden] * (m.layers - 1) + [part.num_classes]
        x, y = part.x[part.train_mask], part.y[part.train_mask]
        self.num_train = float(x.shape[0])
        eval_rows = part.train_mask | part.val_mask | part.test_mask
        self.x_eval, self.y_eval = part.x[eval_rows], part.y[eval_rows]
        self.masks = [part.train_mask[eval_rows], part.val_mask[eval_rows], part.test_mask[eval_rows]]

        self.p_grid, self.q_grid = admm_grids(cfg.quantizer)
        self.schedule = RhoSchedule(pcfg.rho, pcfg.rho_schedule, pcfg.rho_max)
        t0 = time.perf_counter()
        first_layer, network = None, None
        steps = StepRule(None if pcfg.step_start is None else float(pcfg.step_start), int(pcfg.max_backtracks))
        if pcfg.init == "chain":
            network = chain_network(
                x,
                y,
                self.dims,
                seed,
                chain_stages(pcfg),
                float(pcfg.rho_max),
                steps,
                chain_published(pcfg, self.q_grid),
            )
        elif pcfg.warmup_iterations > 0 and m.layers > 2:
            first_layer = warm_start(x, y, self.dims, seed, self.penalties(), pcfg.warmup_iterations)
        self.warmup_time = time.perf_counter() - t0
        self.warmed_up = first_layer is not None
        # A q left in flight past an epoch travels on a group of its own (the evaluation pipeline and
        # the row's all-reduce use comm's); with_own_group is collective: every rank takes this branch alike.
        self.overlap_q = bool(pcfg.overlap_q)
        train_comm = comm.with_own_group() if self.overlap_q else comm
        self.layer_blocks = split_layers(self.dims, comm.world_size, pcfg.blocks)
        self.block, self.links = build_block(
            comm,
            x,
            y,
            self.dims,
            seed,
            self.p_grid,
            self.q_grid,
            pcfg.hidden_init,
            first_layer,
            network,
            steps,
            self.layer_blocks,
            train_comm,
        )
        self.block.z_out, self.block.z_pick = str(pcfg.z_out), str(pcfg.z_pick)
        self.pending: PendingQ | None = None
        self.pen = self.penalties()
        self.eval_loss = 0.0

    def penalties(self) -> Penalties:
        """nu: parallel.nu, or rho at every iteration where parallel.nu is null (the authors' code)."""
        nu = self.cfg.parallel.nu
        return Penalties(
            self.schedule.rho, self.schedule.rho if nu is None else float(nu), float(self.cfg.trainer.weight_decay)
        )

    def stateful(self) -> dict:
        return {"block": self.block, "schedule": self.schedule}

    def before_epoch(self, epoch: int) -> None:
        self.pen = self.penalties()
        self.eval_loss = 0.0

    def train_step(self, epoch: int) -> None:
        self.pending = iterate(self.block, self.links, self.pen, self.pending, self.overlap_q)

    def settle_training(self) -> None:
        """Before a checkpoint (it holds the block's ghosts) and at the end; evaluation need not wait
        (``settles_for_evaluation``): it reads no ghost, and its messages go on another group."""
        if self.pending is not None:
            settle_q(self.block, self.links, self.pending)
            self.pending = None

    def evaluate(self) -> torch.Tensor:
        """The evaluation rows up the block pipeline; the top block counts (the others give zeros)."""
        first, x_eval = self.block.first, self.x_eval
        buffer = x_eval if first == 1 else torch.empty(x_eval.shape[0], self.dims[first - 1], device=self.device)
        with torch.no_grad():
            logits = self.links.forward_eval(buffer, self.block.forward)
        if logits is None:
            return torch.zeros(NUM_COUNTS, dtype=torch.float64, device=self.device)
        train = self.masks[0]
        self.eval_loss = F.cross_entropy(logits[train], self.y_eval[train], reduction="sum").double()
        return split_counts(logits, self.y_eval, self.masks, False)

    def epoch_sums(self, evaluated: bool) -> dict:
        objective, residual = self.block.local_terms(self.pen)
        return {"objective": objective, "residual": residual, "loss": self.eval_loss}

    def row_fields(self, epoch: int, sums: dict[str, float], evaluated: bool) -> dict:
        if not (
            math.isfinite(sums["objective"]) and math.isfinite(sums["residual"])
        ):  # the same sums on every rank: all stop
            raise GnnqError(
                f"parallel=admm diverged: non-finite objective at iteration {epoch}; lower parallel.rho/nu or "
                "check the inputs"
            )
        loss = sums["loss"] / self.num_train if evaluated else None
        if loss is not None:
            self.schedule.after(loss)
        return {"loss": loss, "objective": sums["objective"], "residual": sums["residual"], "rho": self.pen.rho}

    def finish(self, history: list[dict]) -> dict:
        self.settle_training()
        p_grid, q_grid = self.p_grid, self.q_grid
        grid = p_grid or q_grid
        own = sum(layer.W.numel() + layer.b.numel() for layer in self.block.layers)  # this rank's block of layers
        num_params = self.comm.all_reduce(
            torch.tensor([float(own)], dtype=torch.float64, device=self.device), category=CONTROL
        )
        return {
            "num_params": int(num_params.item()),
            "admm": {
                "layer_blocks": [[r.start, r.stop - 1] for r in self.layer_blocks],
                "blocks": self.cfg.parallel.blocks,
                "overlap_q": self.overlap_q,
                "final_objective": history[-1]["objective"],
                "final_residual": history[-1]["residual"],
                "final_rho": self.schedule.rho,
                "fp32_baseline_bytes_per_iteration": fp32_baselines(self.dims, self.layer_blocks, int(self.num_train)),
                "init": self.cfg.parallel.init,
                "warmup_iterations": self.cfg.parallel.warmup_iterations if self.warmed_up else 0,
                "warmup_time_s": self.warmup_time,
                "grid": None
                if grid is None
                else {
                    "lo": grid.lo,
                    "hi": grid.hi,
                    "levels": grid.levels,
                    "bits": grid.bits,
                    "quantize_p": p_grid is not None,
                    "quantize_q": q_grid is not None,
                },
            },
        }


train_admm = epoch_trainer(
    "gnnq.admm.train:train_admm",
    lambda cfg, part, comm, device, cache_dir: AdmmTrainer(cfg, part, comm, device),
    """pdADMM-G iterations (``trainer.epochs``); checkpoints and resume as in ``gnnq.train.driver.run_epochs``.
    The trainers' one signature (gnnq.train.driver); ``cache_dir`` is not used.""",
)


def build_block(
    comm: Communicator,
    x: torch.Tensor,
    y: torch.Tensor,
    dims: list[int],
    seed: int,
    p_grid: Grid | None,
    q_grid: Grid | None,
    hidden_init: str = "he",
    first: tuple[torch.Tensor, torch.Tensor] | None = None,
    network: list[Layer] | None = None,
    steps: StepRule = StepRule(),
    blocks: str | list[range] = "layers",
    train_comm: Communicator | None = None,
) -> tuple[LayerBlock, NeighbourLinks]:
    """This rank's block of the initial network (identical for any number of ranks) and its links
    (p and q on ``train_comm``, default ``comm``). ``blocks``: every rank's layers, or the rule that
    splits them (``gnnq.admm.partition.split_layers``)."""
    num_layers = len(dims) - 1
    mine = (split_layers(dims, comm.world_size, blocks) if isinstance(blocks, str) else blocks)[comm.rank]
    block = initial_block(x, y, dims, seed, mine, hidden_init, first, p_grid, q_grid, network, steps)
    _project_start(block, p_grid, q_grid)
    below_width = dims[mine.start - 1]  # p of the first layer and q of the layer below
    above_width = dims[mine.stop - 1]  # q of the last layer and p of the layer above
    links = NeighbourLinks(
        comm, mine.start, mine.stop - 1, num_layers, x.shape[0], below_width, above_width, p_grid, q_grid, train_comm
    )
    return block, links


@dataclass
class PendingQ:
    """A q exchange left in flight past its iteration, with the penalties of that iteration (the
    replica of u below is updated with them when the q arrives)."""

    handle: tuple
    pen: Penalties


def iterate(
    block: LayerBlock, links: NeighbourLinks, pen: Penalties, pending: PendingQ | None = None, overlap_q: bool = False
) -> PendingQ | None:
    """One pdADMM-G iteration of this rank's block; p in flight while W, b and z update.

    ``overlap_q``: the q exchange that ends the iteration is returned in flight instead of waited
    for; pass it as ``pending`` to the next iteration, which runs the p-steps of every layer but
    the block's first (they do not read q from below) before it waits for it. The iterates are
    the same either way; ``settle_q`` completes one left in flight at the end."""
    if pending is None:
        block.step_p(pen)
    else:
        block.step_p(pen, block.layers[1:])
        settle_q(block, links, pending)
        block.step_p(pen, block.layers[:1])
    handle = links.exchange_p_start(block.layers[0].p, block.x.device)
    block.step_wbz(pen)
    received = links.finish(handle)
    if received is not None:
        block.p_above = received
    block.step_qu(pen)
    posted = PendingQ(links.exchange_q_start(block.layers[-1].q, block.x.device), pen)
    if overlap_q:
        return posted
    settle_q(block, links, posted)
    return None


def settle_q(block: LayerBlock, links: NeighbourLinks, pending: PendingQ) -> None:
    """Wait for a q exchange; take q_{first-1}^{k+1} from below (and update the replica of u there)."""
    received = links.finish(pending.handle)
    if received is not None:
        block.receive_q_below(received, pending.pen)


def _project_start(block: LayerBlock, p_grid: Grid | None, q_grid: Grid | None) -> None:
    """Under pdADMM-G-Q what is sent lies on the grid from the first iteration on."""
    if p_grid is not None:
        for layer in block.layers:
            if layer.p is not None:
                layer.p = p_grid.project(layer.p)
        if block.p_above is not None:
            block.p_above = p_grid.project(block.p_above)
    if q_grid is not None:
        for layer in block.layers:
            if layer.q is not None:
                layer.q = q_grid.project(layer.q)
        if block.q_below is not None:
            block.q_below = q_grid.project(block.q_below)
