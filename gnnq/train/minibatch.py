"""Single-process mini-batch training with uniform neighbour sampling: the reference baseline.

What many users would run instead of full-graph training (PyG/DGL-style GraphSAGE/GCN with
NeighborLoader), on the same dataset, model class and size as gnnq's full-graph runs, so a
leaderboard can compare time-to-accuracy. Evaluation is exact full-graph inference with the
same model (SyncStrategy on the 1-rank part), as in ``gnnq.train.loop.train``.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Sequence

import torch
from omegaconf import DictConfig

from gnnq.comm import Communicator, HaloExchange
from gnnq.data.halo import Part
from gnnq.data.neighbor_sampler import NeighborSampler
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import SyncStrategy
from gnnq.train.checkpoint import Checkpoints
from gnnq.train.faults import FaultInjector
from gnnq.train.loop import EpochCallback, summarize
from gnnq.train.metrics import loss_sum, metrics_from_counts, split_counts
from gnnq.train.optim import make_optimizer


def resolve_fanouts(fanouts: Sequence[int], layers: int) -> list[int]:
    """parallel.fanouts as one value per layer (input layer first); one value applies to every layer."""
    values = [int(f) for f in fanouts]
    if len(values) == 1:
        values = values * layers
    if len(values) != layers:
        raise ValueError(
            f"parallel.fanouts={values} is not allowed: give one value (used for every layer) "
            f"or one per layer (model.layers={layers}), input layer first"
        )
    if any(f != -1 and f < 1 for f in values):
        raise ValueError(f"parallel.fanouts={values} is not allowed: each must be a positive neighbour count or -1 (all neighbours)")
    return values


def train_minibatch(
    cfg: DictConfig,
    part: Part,
    comm: Communicator,
    on_epoch: EpochCallback | None = None,
    device=torch.device("cpu"),
) -> dict:
    """Train for cfg.trainer.epochs passes over the shuffled training nodes; return the run summary.

    One optimizer step per batch of cfg.parallel.batch_size targets (loss: mean over the batch).
    Rows and summary carry the same keys as ``train``'s (communication fields are zero), plus
    ``batches`` per row and ``summary["minibatch"]``.
    """
    if comm.world_size != 1:
        raise ValueError(f"parallel=minibatch runs in one process; set cluster.nproc=1 (and cluster.hosts=1), "
                         f"not a world size of {comm.world_size}")  # fmt: skip
    fanouts = resolve_fanouts(cfg.parallel.fanouts, cfg.model.layers)
    batch_size = int(cfg.parallel.batch_size)  # >= 1: checked with the config
    f64 = {"dtype": torch.float64, "device": device}
    part = part.to(device)
    seed = int(cfg.trainer.seed)
    torch.manual_seed(seed)
    model = build_model(cfg, part).to(device)  # same initial parameters as train() with this seed
    torch.manual_seed(seed + 1)  # dropout stream, as rank 0 in train()
    optimizer = make_optimizer(cfg, model.parameters())
    sampler = NeighborSampler(part, cfg.model.name, fanouts)
    generator = torch.Generator(device=device)  # shuffling and sampling: their own reproducible stream
    generator.manual_seed(seed)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)  # empty plan: one part
    strategy = SyncStrategy(exchange, local_graph_for(cfg.model.name, part), part.x)
    masks = [part.train_mask, part.val_mask, part.test_mask]
    train_idx = torch.nonzero(part.train_mask).flatten()
    fault = FaultInjector(os.environ.get("GNNQ_FAULT_INJECT"), comm.rank)

    history: list[dict] = []
    best = {"val": None, "test": None, "epoch": None}
    sampled_edges = 0
    for epoch in range(1, cfg.trainer.epochs + 1):
        fault.check(epoch)
        t0 = time.perf_counter()
        model.train()
        loss_total = torch.zeros((), **f64)
        order = train_idx[torch.randperm(train_idx.numel(), generator=generator, device=device)]
        batches = order.split(batch_size)
        for targets in batches:
            blocks = sampler.sample(targets, generator)
            sampled_edges += blocks.num_sampled_edges
            optimizer.zero_grad(set_to_none=True)
            logits = model(part.x[blocks.input_ids], blocks, blocks.num_dst)
            loss = loss_sum(logits, part.y[targets], part.multilabel) / targets.numel()
            loss.backward()
            optimizer.step()
            loss_total += loss.detach().double() * targets.numel()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_time = time.perf_counter() - t0

        evaluated = epoch % cfg.trainer.eval_every == 0 or epoch == cfg.trainer.epochs
        scores = {"train": None, "val": None, "test": None}
        if evaluated:
            model.eval()
            strategy.begin_evaluation()
            with torch.no_grad():
                counts = split_counts(model(part.x, strategy), part.y, masks, part.multilabel)
            scores = metrics_from_counts(counts, part.metric)
        row = {
            "epoch": epoch,
            "loss": loss_total.item() / max(1, train_idx.numel()),  # mean over training nodes, as train()'s loss
            **scores,
            "epoch_time_s": epoch_time,
            "comm_time_s": 0.0,
            "compute_time_s": epoch_time,
            "comm_bytes": 0,
            "grad_sync_bytes": 0,
            "eval_comm_bytes": 0,
            "batches": len(batches),
        }
        if row["val"] is not None and (best["val"] is None or row["val"] > best["val"]):
            best = {"val": row["val"], "test": row["test"], "epoch": epoch}
        history.append(row)
        if on_epoch is not None:
            on_epoch(row)

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB on Linux
    summary = summarize(history, best, 0.0, [peak_mib], 1, metric=part.metric)
    summary["comm_bytes_per_epoch_by_layer"] = {}
    summary["device"] = device.type
    summary["quantization"] = None
    summary["codec_backend"] = None
    summary["nonfinite_values_zeroed"] = 0
    summary["checkpoints"] = Checkpoints(0, None, comm).describe()  # the reference is not checkpointed
    summary["minibatch"] = {
        "fanouts": fanouts,
        "batch_size": batch_size,
        "sampled_edges_per_epoch": sampled_edges // max(1, len(history)),
    }
    if device.type == "cuda":
        summary["peak_gpu_memory_mib_per_rank"] = [round(torch.cuda.max_memory_allocated(device) / 2**20, 1)]
    return summary
