"""Single-process mini-batch training with uniform neighbour sampling: the reference baseline.

What many users would run instead of full-graph training (PyG/DGL-style GraphSAGE/GCN with
NeighborLoader), on the same dataset, model class and size as gnnq's full-graph runs, so a
leaderboard can compare time-to-accuracy. Evaluation is exact full-graph inference with the
same model (SyncStrategy on the 1-rank part), as in full-graph training (``gnnq.train.full_graph``).
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from gnnq.comm import Communicator, HaloExchange
from gnnq.config.validate import resolve_fanouts
from gnnq.data.part import Part
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model, count_trainable_parameters
from gnnq.parallel import SyncStrategy
from gnnq.train.driver import RowCategories, Trainer, epoch_trainer
from gnnq.train.full_graph import evaluate_full_graph
from gnnq.train.metrics import loss_sum
from gnnq.train.neighbor_sampler import NeighborSampler
from gnnq.train.optim import make_optimizer


class MinibatchTrainer(Trainer):
    """One process, one optimizer step per batch of ``parallel.batch_size`` sampled targets."""

    row_categories = RowCategories()  # one process: nothing is sent

    def __init__(self, cfg: DictConfig, part: Part, comm: Communicator, device=torch.device("cpu")):
        if comm.world_size != 1:
            raise ValueError(
                f"parallel=minibatch runs in one process; set cluster.nproc=1 (and cluster.hosts=1), "
                f"not a world size of {comm.world_size}"
            )
        self.fanouts = resolve_fanouts(cfg.parallel.fanouts, cfg.model.layers)
        self.batch_size = int(cfg.parallel.batch_size)  # >= 1: checked with the config
        part = part.to(device)
        self.part, self.metric, self.device = part, part.metric, device
        seed = int(cfg.trainer.seed)
        torch.manual_seed(seed)
        self.model = build_model(cfg, part).to(device)  # same initial parameters as train() with this seed
        torch.manual_seed(seed + 1)  # dropout stream, as rank 0 in train()
        self.optimizer = make_optimizer(cfg, self.model.parameters())
        self.sampler = NeighborSampler(part, cfg.model.name, self.fanouts)
        self.generator = torch.Generator(device=device)  # shuffling and sampling: their own reproducible stream
        self.generator.manual_seed(seed)
        exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)  # empty plan: one part
        self.strategy = SyncStrategy(exchange, local_graph_for(cfg.model.name, part), part.x)
        self.masks = [part.train_mask, part.val_mask, part.test_mask]
        self.train_idx = torch.nonzero(part.train_mask).flatten()
        self.sampled_edges = 0
        self.batches = 0
        self.loss_total = None

    def train_step(self, epoch: int) -> None:
        part, model, optimizer = self.part, self.model, self.optimizer
        model.train()
        self.loss_total = torch.zeros((), dtype=torch.float64, device=self.device)
        order = self.train_idx[torch.randperm(self.train_idx.numel(), generator=self.generator, device=self.device)]
        batches = order.split(self.batch_size)
        for targets in batches:
            blocks = self.sampler.sample(targets, self.generator)
            self.sampled_edges += blocks.num_sampled_edges
            optimizer.zero_grad(set_to_none=True)
            logits = model(part.x[blocks.input_ids], blocks, blocks.num_dst)
            loss = loss_sum(logits, part.y[targets], part.multilabel) / targets.numel()
            loss.backward()
            optimizer.step()
            self.loss_total += loss.detach().double() * targets.numel()
        self.batches = len(batches)

    def evaluate(self) -> torch.Tensor:
        return evaluate_full_graph(self.model, self.strategy, self.part, self.masks)

    def epoch_sums(self, evaluated: bool) -> dict:
        return {"loss": self.loss_total}

    def row_fields(self, epoch: int, sums: dict[str, float], evaluated: bool) -> dict:
        # mean over training nodes, as train()'s loss
        return {"loss": sums["loss"] / max(1, self.train_idx.numel()), "batches": self.batches}

    def finish(self, history: list[dict]) -> dict:
        return {
            "num_params": count_trainable_parameters(self.model),
            "comm_bytes_per_epoch_by_layer": {},
            "quantization": None,
            "codec_backend": None,
            "nonfinite_values_zeroed": 0,
            "minibatch": {
                "fanouts": self.fanouts,
                "batch_size": self.batch_size,
                "sampled_edges_per_epoch": self.sampled_edges // max(1, len(history)),
            },
        }


train_minibatch = epoch_trainer(
    "gnnq.train.minibatch:train_minibatch",
    lambda cfg, part, comm, device, cache_dir: MinibatchTrainer(cfg, part, comm, device),
    """Train for cfg.trainer.epochs passes over the shuffled training nodes; return the run summary.

    One optimizer step per batch of cfg.parallel.batch_size targets (loss: mean over the batch).
    Rows and summary carry the same keys as ``train``'s (communication fields are zero), plus
    ``batches`` per row and ``summary["minibatch"]``. Not checkpointed (the reference is short): the
    trainers' one signature (gnnq.train.driver), whose ``cache_dir``, ``run_dir`` and ``resume`` it does not use.""",
    checkpoints=False,
)
