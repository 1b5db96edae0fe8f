"""Full-graph training on one partition: the same code for 1 and N ranks."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig

from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import CONTROL, GRAD_SYNC, HALO_EVAL, HALO_SETUP, HALO_TRAIN
from gnnq.comm.grad_sync import GradientSync, make_gradient_sync
from gnnq.config.registry import FULL_GRAPH_TRAINER, QUANTIZERS, resolve
from gnnq.data.part import Part
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model, count_trainable_parameters
from gnnq.parallel import make_strategy
from gnnq.train.driver import RowCategories, Trainer, epoch_trainer
from gnnq.train.grad_sync import sync_parameters
from gnnq.train.metrics import loss_sum, split_counts
from gnnq.train.optim import make_optimizer
from gnnq.train.trace_setup import start_trace, stop_trace


def evaluate_full_graph(model: torch.nn.Module, strategy, part: Part, masks) -> torch.Tensor:
    """Split counts of exact full-graph inference (evaluation traffic, no dropout)."""
    model.eval()
    strategy.begin_evaluation()
    with torch.no_grad():
        return split_counts(model(part.x, strategy), part.y, masks, part.multilabel)


def forward_backward(
    model: torch.nn.Module,
    part: Part,
    strategy,
    num_train: float,
    comm: Communicator,
    grad_sync: GradientSync | None = None,
    epoch: int = 0,
):
    """One full-graph forward and backward; leaves the global (summed over ranks) gradients in ``.grad``,
    summed by ``grad_sync`` (None: the exact all-reduce on ``comm``) for training epoch ``epoch``.

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
    (grad_sync or GradientSync(comm)).sync(list(model.parameters()), epoch)
    return logits, loss


class FullGraphTrainer(Trainer):
    """Data-parallel full-graph training: every rank one partition, halos exchanged by the strategy."""

    row_categories = RowCategories(train=(HALO_TRAIN,), grad=(GRAD_SYNC,), eval=(HALO_EVAL,))

    def __init__(
        self, cfg: DictConfig, part: Part, comm: Communicator, device=torch.device("cpu"), cache_dir: Path | None = None
    ):
        self.f64 = {"dtype": torch.float64, "device": device}
        part = part.to(device)
        self.part, self.comm, self.metric = part, comm, part.metric
        seed = int(
            comm.broadcast(torch.tensor([cfg.trainer.seed], dtype=torch.int64, device=device), category=CONTROL).item()
        )
        torch.manual_seed(seed)
        self.model = build_model(cfg, part).to(device)
        sync_parameters(self.model, comm)
        self.grad_sync = make_gradient_sync(cfg.trainer.get("grad_sync"), comm, seed)
        torch.manual_seed(seed + 1 + comm.rank)  # per-rank dropout streams, reproducible
        self.optimizer = make_optimizer(cfg, self.model.parameters())
        graph = local_graph_for(cfg.model.name, part)
        self.quant = QUANTIZERS.target(cfg.quantizer.name).from_config(
            cfg.quantizer, seed, comm.rank
        )  # its codec family
        self.exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts, self.quant)
        self.strategy = make_strategy(cfg.parallel, self.exchange, graph, part.x, seed)
        self.assigner = None
        self.inputs_every_epoch = cfg.parallel.get("inputs", "once") == "every_epoch"
        inputs_keys = [(0, "fwd")] if self.inputs_every_epoch else []
        assigner = QUANTIZERS.choice(cfg.quantizer.name).assigner  # a codec family whose widths are assigned
        if assigner:
            m = cfg.model
            self.assigner = resolve(assigner)(
                cfg.quantizer,
                comm,
                self.exchange,
                graph,
                m.name,
                m.hidden,
                m.layers,
                cache_dir,
                self.overheads,
                part,
                input_dim=part.x.shape[1] if inputs_keys else None,
            )
        self.masks = [part.train_mask, part.val_mask, part.test_mask]
        self.num_train = comm.all_reduce(part.train_mask.sum().to(torch.float64), category=CONTROL).item()
        setup = torch.tensor([float(comm.stats.total_bytes(HALO_SETUP))], **self.f64)
        self.setup_comm_bytes = comm.all_reduce(setup, category=CONTROL).item()
        self.layer_keys = inputs_keys + [(layer, d) for layer in range(1, cfg.model.layers) for d in ("fwd", "bwd")]
        self.layer_bytes = torch.zeros(
            len(self.layer_keys), **self.f64
        )  # halo bytes of training steps, summed over epochs
        self.assignment = None
        self.loss = None

    def stateful(self) -> dict:
        return {
            "model": self.model,
            "optimizer": self.optimizer,
            "strategy": self.strategy,
            "assigner": self.assigner,
            "grad_sync": self.grad_sync if self.grad_sync.has_state else None,
        }

    def loop_state(self) -> dict:
        return {"layer_bytes": self.layer_bytes, "nonfinite_zeroed": self.exchange.nonfinite_zeroed}

    def load_loop_state(self, state: dict) -> None:
        self.layer_bytes = state["layer_bytes"].to(**self.f64)
        self.exchange.nonfinite_zeroed = state["nonfinite_zeroed"]

    def before_epoch(self, epoch: int) -> None:
        self.assignment = self.assigner.before_epoch(epoch) if self.assigner is not None else None

    def settle_training(self) -> None:
        self.strategy.settle()

    def train_step(self, epoch: int) -> None:
        self.model.train()
        self.strategy.begin_training_epoch(epoch)
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = forward_backward(
            self.model, self.part, self.strategy, self.num_train, self.comm, self.grad_sync, epoch
        )[1]
        self.optimizer.step()

    def evaluate(self) -> torch.Tensor:
        return evaluate_full_graph(self.model, self.strategy, self.part, self.masks)

    def epoch_sums(self, evaluated: bool) -> dict:
        for i, key in enumerate(self.layer_keys):
            self.layer_bytes[i] += self.comm.stats.bytes.get((HALO_TRAIN,) + key, 0)
        return {"loss": self.loss.item()}  # already divided by the global training count

    def row_fields(self, epoch: int, sums: dict[str, float], evaluated: bool) -> dict:
        fields = {"loss": sums["loss"]}
        fields.update(self.strategy.epoch_fields())
        self.strategy.end_training_epoch(epoch, sums["loss"])
        if self.assignment is not None:
            fields["assignment"] = {k: self.assignment[k] for k in ("solve_time_s", "assign_time_s", "bits_histogram")}
        return fields

    def finish(self, history: list[dict]) -> dict:
        self.strategy.close()
        comm, exchange = self.comm, self.exchange
        comm.all_reduce(self.layer_bytes, category=CONTROL)
        zeroed = comm.all_reduce(torch.tensor([float(exchange.nonfinite_zeroed)], **self.f64), category=CONTROL)
        extras = {
            "num_params": count_trainable_parameters(self.model),
            "comm_bytes_per_epoch_by_layer": {
                f"{layer}.{d}": int(b) // max(1, len(history))
                for (layer, d), b in zip(self.layer_keys, self.layer_bytes.tolist())
            },
            "quantization": self.quant.describe(self.inputs_every_epoch) if self.quant is not None else None,
            "codec_backend": exchange.codec_backend,  # torch | triton (None: nothing quantized)
            "nonfinite_values_zeroed": int(zeroed.item()),
            "grad_sync": self.grad_sync.describe(),
        }
        if self.assigner is not None:
            extras["adaptive"] = self.assigner.describe()
        if self.strategy.describe() is not None:
            extras["strategy"] = self.strategy.describe()
        return extras


def traced(run, cfg, part: Part, comm: Communicator, run_dir: Path | None, resume: bool) -> dict:
    """``run()`` with trainer.trace=true's recorder around it (trace/ under run_dir, docs/runs.md#traces)."""
    if not cfg.trainer.get("trace", False):
        return run()
    lines = start_trace(cfg, part, comm, run_dir, resume)
    try:
        return run()
    finally:
        stop_trace(comm, lines)


train = epoch_trainer(
    FULL_GRAPH_TRAINER,
    FullGraphTrainer,
    """Train for cfg.trainer.epochs epochs; return the run summary (identical on every rank).

    ``cache_dir`` (the partition's cache entry) keeps per-model data derived from the part.
    Checkpoints (``run_dir``, ``resume``) as in ``gnnq.train.driver.run_epochs``.""",
    around=traced,
)
