"""parallel=tensor3d training: a GCN on an X x Y x Z grid of ranks (Plexus's 3D tensor parallelism).

Every rank reads the whole graph (one shared part) and keeps only its blocks (gnnq.parallel.tensor3d); the model
(gnnq.models.tensor3d) starts from the same full weights as the Vanilla GCN of the same seed, cut into blocks.
Training uses the training rows (gnnq's split), as every gnnq method does; rows and summaries are the driver's.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from gnnq.comm import Communicator
from gnnq.comm.accounting import CONTROL, TENSOR_EVAL, TENSOR_TRAIN
from gnnq.config.registry import QUANTIZERS
from gnnq.data.part import Part
from gnnq.errors import ConfigError
from gnnq.models.factory import build_model
from gnnq.models.tensor3d import GridGCN
from gnnq.parallel.tensor3d import Tensor3dStrategy
from gnnq.parallel.tensor3d_grid import epoch_bytes, plexus_comm_volume, plexus_memory_gib
from gnnq.train.driver import NUM_COUNTS, EpochCallback, RowCategories, Trainer, run_epochs
from gnnq.train.metrics import split_counts
from gnnq.train.optim import make_optimizer
from gnnq.train.trace_setup import start_trace, stop_trace

INITS = ("glorot", "plexus")


def full_weights(cfg: DictConfig, part: Part, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Every layer's whole weight (din x dout) and bias: those of the Vanilla GCN built with ``seed``
    (``parallel.weight_init=glorot``), or Plexus's (``plexus``: kaiming_uniform_(a=sqrt(5)) on the din x dout weight,
    plexus/gcn_conv.py ``GCNConv.__init__``); no bias where ``parallel.bias`` is false (Plexus has none)."""
    torch.manual_seed(seed)
    model = build_model(cfg, part)
    weights = [conv.linear.weight.detach().t().contiguous() for conv in model.convs]
    if cfg.parallel.weight_init == "plexus":
        for w in weights:
            torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    elif cfg.parallel.weight_init not in INITS:
        raise ConfigError(f"parallel.weight_init={cfg.parallel.weight_init!r}; allowed: {', '.join(INITS)}")
    biases = [conv.linear.bias.detach().clone() if cfg.parallel.bias else None for conv in model.convs]
    return weights, biases


def check_model(cfg: DictConfig, part: Part) -> None:
    """What the launch-time checks cannot see (the model and its norm are checked there: registry needs, check)."""
    if part.multilabel:
        raise ConfigError("parallel=tensor3d trains single-label classification; this dataset is multi-label")


class Tensor3dTrainer(Trainer):
    """Every rank one block of every layer; an epoch is one full-graph step."""

    row_categories = RowCategories(train=(TENSOR_TRAIN,), eval=(TENSOR_EVAL,))

    def __init__(self, cfg: DictConfig, part: Part, comm: Communicator, device=torch.device("cpu")):
        check_model(cfg, part)
        part = part.to(device)
        self.comm, self.metric, self.device, self.cfg = comm, part.metric, device, cfg
        seed = int(
            comm.broadcast(torch.tensor([cfg.trainer.seed], dtype=torch.int64, device=device), category=CONTROL).item()
        )
        dims = [part.x.shape[1]] + [cfg.model.hidden] * (cfg.model.layers - 1) + [part.num_classes]
        quant = QUANTIZERS.target(cfg.quantizer.name).from_config(cfg.quantizer, seed, comm.rank)
        self.strategy = Tensor3dStrategy.from_config(cfg.parallel, comm, part, dims, seed, quant)
        s = self.strategy
        weights, biases = full_weights(cfg, part, seed)
        self.model = GridGCN(
            [s.weight_shard(k, w) for k, w in enumerate(weights)],
            [None if b is None else s.bias_block(k, b) for k, b in enumerate(biases)],
            s.shapes,
            cfg.model.dropout,
        ).to(device)
        torch.manual_seed(seed + 1 + comm.rank)
        self.optimizer = make_optimizer(cfg, self.model.parameters())
        train = s.masks[0].sum().to(torch.float64) if s.counts_here else torch.zeros((), dtype=torch.float64)
        self.num_train = comm.all_reduce(train.reshape(1), category=CONTROL).item()
        self.dims, self.loss = dims, None

    def trace_facts(self) -> dict:
        """What a projection needs of the grid (trace/meta.json's ``tensor3d``; gnnq.projection.tensor3d)."""
        s = self.strategy
        return {
            "grid": [s.grid.x, s.grid.y, s.grid.z],
            "nodes": int(s.nodes),
            "nnz": int(s.nnz),
            "dims": [int(d) for d in self.dims],
            "bias": bool(self.cfg.parallel.bias),
            "inputs_every_epoch": bool(s.inputs_every_epoch),
            "quantized": s.quant is not None,
        }

    def stateful(self) -> dict:
        return {"model": self.model, "optimizer": self.optimizer}

    def forward(self) -> torch.Tensor:
        s = self.strategy
        return self.model(s.x, s.graphs, s, s.inputs_every_epoch)

    def train_step(self, epoch: int) -> None:
        self.model.train()
        self.strategy.begin_training_epoch(epoch)
        self.optimizer.zero_grad(set_to_none=True)
        s = self.strategy
        logits = self.forward()
        train = s.masks[0]
        loss = F.cross_entropy(logits[train], s.y[train], reduction="sum") / self.num_train
        loss.backward()
        self.optimizer.step()
        self.loss = loss.detach()

    def evaluate(self) -> torch.Tensor:
        self.model.eval()
        self.strategy.begin_evaluation()
        with torch.no_grad():
            logits = self.forward()
        if not self.strategy.counts_here:
            return torch.zeros(NUM_COUNTS, dtype=torch.float64, device=self.device)
        return split_counts(logits, self.strategy.y, self.strategy.masks, False)

    def epoch_sums(self, evaluated: bool) -> dict:
        return {"loss": self.loss.item() if self.strategy.counts_here else 0.0}

    def finish(self, history: list[dict]) -> dict:
        s = self.strategy
        own = float(sum(p.numel() for p in self.model.weights) + sum(p.numel() for p in self.model.biases))
        params = self.comm.all_reduce(torch.tensor([own], dtype=torch.float64, device=self.device), category=CONTROL)
        bytes_by_layer = epoch_bytes(
            s.grid, s.nodes, self.dims, bias=bool(self.cfg.parallel.bias), inputs_every_epoch=s.inputs_every_epoch
        )
        return {
            "num_params": int(params.item()),
            "quantization": s.quant.describe() if s.quant is not None else None,
            "tensor3d": {
                "grid": [s.grid.x, s.grid.y, s.grid.z],
                "grid_chosen_by": s.chosen,
                "permutation": s.permutation,
                "inputs": "every_epoch" if s.inputs_every_epoch else "once",
                "padded_nodes": s.padded,
                "padded_widths": s.widths,
                "exact_fp32_bytes_per_epoch_by_layer": bytes_by_layer,
                "exact_fp32_bytes_per_epoch": sum(bytes_by_layer.values()),
                "plexus_model_bytes_per_epoch": plexus_comm_volume(s.grid, s.nodes, self.dims) * s.grid.size,
                "plexus_model_memory_gib_per_rank": plexus_memory_gib(s.grid, s.nodes, s.nnz, self.dims),
            },
        }


def train_tensor3d(
    cfg: DictConfig,
    part: Part,
    comm: Communicator,
    on_epoch: EpochCallback | None = None,
    device=torch.device("cpu"),
    cache_dir: Path | None = None,
    run_dir: Path | None = None,
    resume: bool = False,
) -> dict:
    """Train for cfg.trainer.epochs epochs on the grid; the run summary (identical on every rank)."""
    trainer = Tensor3dTrainer(cfg, part, comm, device)
    if not cfg.trainer.get("trace", False):
        return run_epochs(trainer, cfg.trainer, comm, on_epoch, device, run_dir, resume)
    lines = start_trace(cfg, part, comm, run_dir, resume, extra={"tensor3d": trainer.trace_facts()})
    try:
        return run_epochs(trainer, cfg.trainer, comm, on_epoch, device, run_dir, resume)
    finally:
        stop_trace(comm, lines)
