"""Full-graph training on one partition: the same code for 1 and N ranks."""

from __future__ import annotations

import os
import resource
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
from omegaconf import DictConfig

from gnnq.adaptive.assigner import AdaptiveAssigner
from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import CONTROL, GRAD_SYNC, HALO_EVAL, HALO_SETUP, HALO_TRAIN
from gnnq.comm.codec import message_quantization
from gnnq.data.halo import Part
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import make_strategy
from gnnq.train.checkpoint import Checkpoints
from gnnq.train.faults import FaultInjector
from gnnq.train.grad_sync import all_reduce_gradients, sync_parameters
from gnnq.train.metrics import loss_sum, metrics_from_counts, split_counts
from gnnq.train.optim import make_optimizer

EpochCallback = Callable[[dict], None]


def forward_backward(model: torch.nn.Module, part: Part, strategy, num_train: float, comm: Communicator):
    """One full-graph forward and backward; leaves the global (all-reduced) gradients in ``.grad``.

    A row-wise model (each output row depends on its own input row only: the GA-MLP) runs on the
    training rows alone, which gives the same loss and gradients for a fraction of the work;
    the returned logits are then those of the training rows.
    """
    if getattr(model, "rowwise", False):
        logits = model(part.x[part.train_mask], strategy)
        loss = loss_sum(logits, part.y[part.train_mask], part.multilabel) / num_train
    else:
        logits = model(part.x, strategy)
        loss = loss_sum(logits[part.train_mask], part.y[part.train_mask], part.multilabel) / num_train
    loss.backward()
    all_reduce_gradients(model, comm)
    return logits, loss


def train(
    cfg: DictConfig,
    part: Part,
    comm: Communicator,
    on_epoch: EpochCallback | None = None,
    device=torch.device("cpu"),
    cache_dir: Path | None = None,
    run_dir: Path | None = None,
    resume: bool = False,
) -> dict:
    """Train for cfg.trainer.epochs epochs; return the run summary (identical on every rank).

    ``cache_dir`` (the partition's cache entry) keeps per-model data derived from the part.
    With ``run_dir``, every ``trainer.checkpoint_every`` epochs each rank checkpoints its state
    there; ``resume`` continues from the latest checkpoint, and on CPU the run then ends exactly
    as an uninterrupted one would (times aside).
    """
    f64 = {"dtype": torch.float64, "device": device}
    part = part.to(device)
    seed = int(comm.broadcast(torch.tensor([cfg.trainer.seed], dtype=torch.int64, device=device), category=CONTROL).item())
    torch.manual_seed(seed)
    model = build_model(cfg, part).to(device)
    sync_parameters(model, comm)
    torch.manual_seed(seed + 1 + comm.rank)  # per-rank dropout streams, reproducible
    optimizer = make_optimizer(cfg, model.parameters())
    graph = local_graph_for(cfg.model.name, part)
    quant = message_quantization(cfg.quantizer, seed, comm.rank)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts, quant)
    strategy = make_strategy(cfg.parallel, exchange, graph, part.x, seed)
    assigner = None
    if cfg.quantizer.name == "adaptive":
        m = cfg.model
        assigner = AdaptiveAssigner(cfg.quantizer, comm, exchange, graph, m.name, m.hidden, m.layers, cache_dir)
    masks = [part.train_mask, part.val_mask, part.test_mask]
    num_train = comm.all_reduce(part.train_mask.sum().to(torch.float64), category=CONTROL).item()
    setup_bytes = comm.all_reduce(torch.tensor([float(comm.stats.total_bytes(HALO_SETUP))], **f64), category=CONTROL).item()
    fault = FaultInjector(os.environ.get("GNNQ_FAULT_INJECT"), comm.rank)

    layer_keys = [(layer, d) for layer in range(1, cfg.model.layers) for d in ("fwd", "bwd")]
    layer_bytes = torch.zeros(len(layer_keys), **f64)  # halo bytes of training steps, summed over epochs
    history: list[dict] = []
    best = {"val": None, "test": None, "epoch": None}
    stateful = {"model": model, "optimizer": optimizer, "strategy": strategy, "assigner": assigner}
    checkpoints = Checkpoints(cfg.trainer.checkpoint_every, run_dir, comm)
    first_epoch = 1
    if resume:
        loop_state = checkpoints.restore(stateful, device)
        history, best, first_epoch = loop_state["history"], loop_state["best"], loop_state["epoch"] + 1
        layer_bytes = loop_state["layer_bytes"].to(**f64)
        exchange.nonfinite_zeroed = loop_state["nonfinite_zeroed"]
    for epoch in range(first_epoch, cfg.trainer.epochs + 1):
        fault.check(epoch)
        assignment = assigner.before_epoch(epoch) if assigner is not None else None
        comm.stats.reset()
        t0 = time.perf_counter()
        model.train()
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad(set_to_none=True)
        loss = forward_backward(model, part, strategy, num_train, comm)[1]
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_time = time.perf_counter() - t0
        comm_time = comm.stats.total_seconds(HALO_TRAIN, GRAD_SYNC)
        for i, key in enumerate(layer_keys):
            layer_bytes[i] += comm.stats.bytes.get((HALO_TRAIN,) + key, 0)

        counts = torch.zeros(9, **f64)
        evaluated = epoch % cfg.trainer.eval_every == 0 or epoch == cfg.trainer.epochs
        if evaluated:
            model.eval()
            strategy.begin_evaluation()
            with torch.no_grad():
                counts = split_counts(model(part.x, strategy), part.y, masks, part.multilabel)
        sums = torch.cat([
            torch.tensor([loss.item(), comm.stats.total_bytes(HALO_TRAIN), comm.stats.total_bytes(GRAD_SYNC),
                          comm.stats.total_bytes(HALO_EVAL)], **f64),
            counts,
        ])
        maxes = torch.tensor([epoch_time, comm_time, epoch_time - comm_time], **f64)
        comm.all_reduce(sums, category=CONTROL)
        comm.all_reduce(maxes, category=CONTROL, op=torch.distributed.ReduceOp.MAX)

        row = {
            "epoch": epoch,
            "loss": sums[0].item(),
            **(metrics_from_counts(sums[4:], part.metric) if evaluated else {"train": None, "val": None, "test": None}),
            "epoch_time_s": maxes[0].item(),
            "comm_time_s": maxes[1].item(),
            "compute_time_s": maxes[2].item(),
            "comm_bytes": int(sums[1].item()),
            "grad_sync_bytes": int(sums[2].item()),
            "eval_comm_bytes": int(sums[3].item()),
        }
        if assignment is not None:
            row["assignment"] = {k: assignment[k] for k in ("solve_time_s", "assign_time_s", "bits_histogram")}
        if row["val"] is not None and (best["val"] is None or row["val"] > best["val"]):
            best = {"val": row["val"], "test": row["test"], "epoch": epoch}
        history.append(row)
        if on_epoch is not None:
            on_epoch(row)
        loop_state = {"epoch": epoch, "history": history, "best": best, "layer_bytes": layer_bytes,
                      "nonfinite_zeroed": exchange.nonfinite_zeroed}  # fmt: skip
        checkpoints.maybe_save(epoch, stateful, loop_state, device)
    strategy.close()

    peak = torch.zeros(2, comm.world_size, **f64)
    peak[0, comm.rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB on Linux
    if device.type == "cuda":
        peak[1, comm.rank] = torch.cuda.max_memory_allocated(device) / 2**20
    comm.all_reduce(peak, category=CONTROL)
    comm.all_reduce(layer_bytes, category=CONTROL)
    summary = summarize(history, best, setup_bytes, peak[0].tolist(), comm.world_size, metric=part.metric)
    summary["comm_bytes_per_epoch_by_layer"] = {
        f"{layer}.{d}": int(b) // max(1, len(history)) for (layer, d), b in zip(layer_keys, layer_bytes.tolist())
    }
    summary["device"] = device.type
    summary["quantization"] = quant.describe() if quant is not None else None
    summary["codec_backend"] = exchange.codec_backend  # torch | triton (None: nothing quantized)
    zeroed = torch.tensor([float(exchange.nonfinite_zeroed)], **f64)
    summary["nonfinite_values_zeroed"] = int(comm.all_reduce(zeroed, category=CONTROL).item())
    if assigner is not None:
        summary["adaptive"] = assigner.describe()
    summary["checkpoints"] = checkpoints.describe()
    if device.type == "cuda":
        summary["peak_gpu_memory_mib_per_rank"] = [round(m, 1) for m in peak[1].tolist()]
    return summary


def summarize(history: list[dict], best: dict, setup_bytes: float, peak_mib: list[float], world_size: int, metric: str) -> dict:
    def median(key):
        vals = [r[key] for r in history]
        return statistics.median(vals) if vals else None

    def mean_int(key):  # bytes may vary by epoch under later strategies: total / epochs
        return sum(r[key] for r in history) // len(history) if history else 0

    last = history[-1] if history else {}
    return {
        "metric": metric,
        "epochs": len(history),
        "best_val": best["val"],
        "test": best["test"],
        "best_epoch": best["epoch"],
        "final_loss": last.get("loss"),
        "final_train": last.get("train"),
        "epoch_time_s": median("epoch_time_s"),
        "comm_time_s": median("comm_time_s"),
        "compute_time_s": median("compute_time_s"),
        "comm_bytes_per_epoch": mean_int("comm_bytes"),
        "grad_sync_bytes_per_epoch": mean_int("grad_sync_bytes"),
        "setup_comm_bytes": int(setup_bytes),
        "peak_memory_mib_per_rank": [round(m, 1) for m in peak_mib],
        "world_size": world_size,
    }
