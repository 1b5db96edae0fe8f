"""pdADMM-G / pdADMM-G-Q training: layer blocks on ranks, one ADMM iteration per epoch row.

Every rank holds the GA-MLP inputs of all nodes (one edgeless part) and the layers of its
block. Training uses the labelled training rows only (the paper's setting); evaluation passes
the evaluation rows up the block pipeline. Rows of metrics.jsonl are the usual epoch rows
(an epoch is one iteration) plus ``objective``, ``residual`` and ``rho``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from gnnq.admm.block import Block, Penalties, initial_block, layer_blocks, warm_start
from gnnq.admm.links import NeighbourLinks
from gnnq.comm import Communicator
from gnnq.comm.accounting import ADMM_EVAL, ADMM_TRAIN, CONTROL
from gnnq.comm.grid_codec import Grid
from gnnq.data.halo import Part
from gnnq.errors import ConfigError, GnnqError
from gnnq.train.checkpoint import Checkpoints
from gnnq.train.faults import FaultInjector
from gnnq.train.loop import EpochCallback, summarize
from gnnq.train.metrics import metrics_from_counts, split_counts

STALL_TOLERANCE = 1e-3  # rho_schedule=grow: a loss that falls by less than this has stalled


def admm_grids(qcfg) -> tuple[Grid | None, Grid | None]:
    """(grid for p, grid for q): both None for pdADMM-G (quantizer=fp32)."""
    if qcfg.name != "grid":
        return None, None
    grid = Grid(float(qcfg.grid_min), float(qcfg.grid_max), int(qcfg.grid_levels))
    return grid, (grid if qcfg.quantize_q else None)


class RhoSchedule:
    """rho_schedule=grow: rho x10 (capped) once the training loss has stalled two iterations running."""

    def __init__(self, pcfg):
        self.rho, self.grow, self.cap = float(pcfg.rho), pcfg.rho_schedule == "grow", float(pcfg.rho_max)
        self.losses: list[float] = []

    def state_dict(self) -> dict:
        return {"rho": self.rho, "losses": list(self.losses)}

    def load_state_dict(self, state: dict) -> None:
        self.rho, self.losses = float(state["rho"]), list(state["losses"])

    def after(self, loss: float) -> None:
        """Called with every iteration's training loss (rho_schedule=grow needs trainer.eval_every=1)."""
        self.losses.append(loss)
        last = self.losses[-3:]
        if self.grow and len(last) == 3 and last[2] > last[1] - STALL_TOLERANCE and last[1] > last[0] - STALL_TOLERANCE:
            self.rho = min(10.0 * self.rho, self.cap)
            self.losses.clear()  # the next growth needs two more stalled iterations


def train_admm(cfg: DictConfig, part: Part, comm: Communicator, on_epoch: EpochCallback | None = None,
               device=torch.device("cpu"), run_dir: Path | None = None, resume: bool = False) -> dict:  # fmt: skip
    """pdADMM-G iterations (``trainer.epochs``); checkpoints and resume as in ``gnnq.train.loop.train``."""
    if part.multilabel:
        raise ConfigError("parallel=admm trains single-label classification; this dataset is multi-label")
    f64 = {"dtype": torch.float64, "device": device}
    part = part.to(device)
    seed = int(comm.broadcast(torch.tensor([cfg.trainer.seed], dtype=torch.int64, device=device), category=CONTROL).item())
    m = cfg.model
    dims = [part.x.shape[1]] + [m.hidden] * (m.layers - 1) + [part.num_classes]
    x, y = part.x[part.train_mask], part.y[part.train_mask]
    eval_rows = part.train_mask | part.val_mask | part.test_mask
    x_eval, y_eval = part.x[eval_rows], part.y[eval_rows]
    masks = [part.train_mask[eval_rows], part.val_mask[eval_rows], part.test_mask[eval_rows]]

    p_grid, q_grid = admm_grids(cfg.quantizer)
    schedule = RhoSchedule(cfg.parallel)
    pcfg = cfg.parallel
    t0 = time.perf_counter()
    first_layer = None
    if pcfg.warmup_iterations > 0 and m.layers > 2:
        pen = Penalties(schedule.rho, float(pcfg.nu), float(cfg.trainer.weight_decay))
        first_layer = warm_start(x, y, dims, seed, pen, pcfg.warmup_iterations)
    warmup_time = time.perf_counter() - t0
    block, links = build_block(comm, x, y, dims, seed, p_grid, q_grid, pcfg.hidden_init, first_layer)
    first = block.first

    history: list[dict] = []
    best = {"val": None, "test": None, "epoch": None}
    stateful = {"block": block, "schedule": schedule}
    checkpoints = Checkpoints(cfg.trainer.checkpoint_every, run_dir, comm)
    first_iteration = 1
    if resume:
        loop_state = checkpoints.restore(stateful, device)
        history, best, first_iteration = loop_state["history"], loop_state["best"], loop_state["epoch"] + 1
    fault = FaultInjector(os.environ.get("GNNQ_FAULT_INJECT"), comm.rank)
    for it in range(first_iteration, cfg.trainer.epochs + 1):
        fault.check(it)
        pen = Penalties(schedule.rho, float(cfg.parallel.nu), float(cfg.trainer.weight_decay))
        comm.stats.reset()
        t0 = time.perf_counter()
        iterate(block, links, pen)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        iter_time = time.perf_counter() - t0
        comm_time = comm.stats.total_seconds(ADMM_TRAIN)

        counts = torch.zeros(9, **f64)
        loss_sum = torch.zeros((), **f64)
        evaluated = it % cfg.trainer.eval_every == 0 or it == cfg.trainer.epochs
        if evaluated:
            buffer = x_eval if first == 1 else torch.empty(x_eval.shape[0], dims[first - 1], device=device)
            with torch.no_grad():
                logits = links.forward_eval(buffer, block.forward)
            if logits is not None:
                counts = split_counts(logits, y_eval, masks, False)
                loss_sum = F.cross_entropy(logits[masks[0]], y_eval[masks[0]], reduction="sum").double()
        terms = block.local_terms(pen).to(device)
        sums = torch.cat([
            terms, loss_sum.reshape(1),
            torch.tensor([comm.stats.total_bytes(ADMM_TRAIN), comm.stats.total_bytes(ADMM_EVAL)], **f64),
            counts,
        ])  # fmt: skip
        maxes = torch.tensor([iter_time, comm_time, iter_time - comm_time], **f64)
        comm.all_reduce(sums, category=CONTROL)
        comm.all_reduce(maxes, category=CONTROL, op=torch.distributed.ReduceOp.MAX)
        if not bool(torch.isfinite(sums[:2]).all()):  # every rank sees the same sums, so all stop here
            raise GnnqError(f"parallel=admm diverged: non-finite objective at iteration {it}; lower parallel.rho/nu or check the inputs")
        num_train = float(x.shape[0])
        row = {
            "epoch": it,
            "loss": sums[2].item() / num_train if evaluated else None,
            **(metrics_from_counts(sums[5:], part.metric) if evaluated else {"train": None, "val": None, "test": None}),
            "objective": sums[0].item(),
            "residual": sums[1].item(),
            "rho": pen.rho,
            "epoch_time_s": maxes[0].item(),
            "comm_time_s": maxes[1].item(),
            "compute_time_s": maxes[2].item(),
            "comm_bytes": int(sums[3].item()),
            "grad_sync_bytes": 0,
            "eval_comm_bytes": int(sums[4].item()),
        }
        if row["loss"] is not None:
            schedule.after(row["loss"])
        if row["val"] is not None and (best["val"] is None or row["val"] > best["val"]):
            best = {"val": row["val"], "test": row["test"], "epoch": it}
        history.append(row)
        if on_epoch is not None:
            on_epoch(row)
        checkpoints.maybe_save(it, stateful, {"epoch": it, "history": history, "best": best}, device)

    summary = summarize(history, best, 0.0, _peak_mib(comm, device), comm.world_size, metric=part.metric)
    summary["device"] = device.type
    summary["checkpoints"] = checkpoints.describe()
    summary["admm"] = {
        "layer_blocks": [[r.start, r.stop - 1] for r in layer_blocks(m.layers, comm.world_size)],
        "final_objective": history[-1]["objective"],
        "final_residual": history[-1]["residual"],
        "final_rho": schedule.rho,
        "warmup_iterations": pcfg.warmup_iterations if first_layer is not None else 0,
        "warmup_time_s": warmup_time,
        "grid": None if p_grid is None else {"lo": p_grid.lo, "hi": p_grid.hi, "levels": p_grid.levels, "bits": p_grid.bits,
                                             "quantize_q": q_grid is not None},  # fmt: skip
    }
    return summary


def build_block(comm: Communicator, x: torch.Tensor, y: torch.Tensor, dims: list[int], seed: int,
                p_grid: Grid | None, q_grid: Grid | None, hidden_init: str = "he",
                first: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[Block, NeighbourLinks]:  # fmt: skip
    """This rank's block of the initial network (identical for any number of ranks) and its links."""
    num_layers = len(dims) - 1
    mine = layer_blocks(num_layers, comm.world_size)[comm.rank]
    block = initial_block(x, y, dims, seed, mine, hidden_init, first, p_grid, q_grid is not None)
    _project_start(block, p_grid, q_grid)
    below_width = dims[mine.start - 1]  # p of the first layer and q of the layer below
    above_width = dims[mine.stop - 1]  # q of the last layer and p of the layer above
    links = NeighbourLinks(comm, mine.start, mine.stop - 1, num_layers, x.shape[0], below_width, above_width, p_grid, q_grid)
    return block, links


def iterate(block: Block, links: NeighbourLinks, pen: Penalties) -> None:
    """One pdADMM-G iteration of this rank's block; p in flight while W, b and z update."""
    block.step_p(pen)
    handle = links.exchange_p_start(block.layers[0].p, block.x.device)
    block.step_wbz(pen)
    received = links.finish(handle)
    if received is not None:
        block.p_above = received
    block.step_qu(pen)
    received = links.finish(links.exchange_q_start(block.layers[-1].q, block.x.device))
    if received is not None:
        block.receive_q_below(received, pen)


def _project_start(block: Block, p_grid: Grid | None, q_grid: Grid | None) -> None:
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


def _peak_mib(comm: Communicator, device) -> list[float]:
    import resource

    peak = torch.zeros(comm.world_size, dtype=torch.float64, device=device)
    peak[comm.rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    comm.all_reduce(peak, category=CONTROL)
    return peak.tolist()
