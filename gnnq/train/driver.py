"""The epoch loop every way of training shares: timing, the metrics row, best validation,
the cross-rank reduction, checkpoints and resume, fault injection and peak memory.

A trainer (full-graph ``gnnq.train.full_graph``, pdADMM-G ``gnnq.admm.train``, mini-batch
``gnnq.train.minibatch``) sets itself up in its constructor and says how to take one training
step and how to evaluate; ``run_epochs`` does the rest, so every trainer writes rows with the
keys of ``ROW_KEYS`` (plus its own fields, after them) and a summary with those of
``SUMMARY_KEYS`` (plus its own).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import CONTROL, OVERHEAD
from gnnq.contract import RANK_WARNING_PREFIX, TARGET_SLACK
from gnnq.errors import GnnqError
from gnnq.track.overheads import OVERHEAD_KINDS, OverheadClock
from gnnq.track.process_memory import peak_rss_mib
from gnnq.train.checkpoint import Checkpoints
from gnnq.train.faults import FaultInjector
from gnnq.train.metrics import SPLITS, metrics_from_counts

EpochCallback = Callable[[dict], None]


class TrainFn(Protocol):
    """The one signature of every trainer a parallel choice names (``Choice.trainer``, gnnq.config.registry):
    the rank entry passes all of these; a trainer ignores what it does not use (``cache_dir``: the partition's
    cache entry; ``run_dir``, ``resume``: checkpoints). Returns the run summary."""

    def __call__(
        self,
        cfg,
        part,
        comm: Communicator,
        on_epoch: EpochCallback | None = None,
        device: torch.device = torch.device("cpu"),
        cache_dir: Path | None = None,
        run_dir: Path | None = None,
        resume: bool = False,
    ) -> dict: ...


# Every metrics.jsonl row starts with these keys, in this order; a trainer's own fields follow.
ROW_KEYS = (
    "epoch",
    "loss",
    *SPLITS,
    "epoch_time_s",
    "comm_time_s",
    "compute_time_s",
    "transfer_time_s",
    "codec_time_s",
    "halo_comm_time_s",
    "comm_bytes",
    "grad_sync_bytes",
    "eval_comm_bytes",
    "overhead_time_s",
    "overhead_by_kind",
    "overhead_bytes",
)
# Every run summary has these keys; a trainer adds its own.
SUMMARY_KEYS = (
    "metric",
    "epochs",
    "best_val",
    "test",
    "best_epoch",
    "final_loss",
    "final_train",
    "final_val",
    "final_test",
    "epoch_time_s",
    "comm_time_s",
    "compute_time_s",
    "transfer_time_s",
    "codec_time_s",
    "halo_comm_time_s",
    "comm_bytes_per_epoch",
    "grad_sync_bytes_per_epoch",
    "eval_comm_bytes_per_epoch",
    "setup_comm_bytes",
    "overhead_time_s",
    "overhead_by_kind",
    "overhead_bytes",
    "training_time_s",
    "throughput_epochs_per_s",
    "peak_memory_mib_per_rank",
    "world_size",
    "device",
    "checkpoints",
    "cpus_per_rank",
    "threads_per_rank",
    "stopped_early",
)
NUM_COUNTS = 3 * len(SPLITS)  # split_counts: three per split


class NonFiniteLossError(GnnqError):
    """The training loss became NaN or inf (trainer.nonfinite_loss=error)."""


@dataclass(frozen=True)
class RowCategories:
    """The communication categories (``gnnq.comm.accounting``) a trainer's rows count."""

    train: tuple[str, ...] = ()  # training messages: the row's comm_bytes; with grad, its comm_time_s
    grad: tuple[str, ...] = ()  # gradient all-reduce: grad_sync_bytes
    eval: tuple[str, ...] = ()  # evaluation messages: eval_comm_bytes


class Trainer:
    """One way of training, as ``run_epochs`` drives it; the constructor sets everything up.

    Per epoch the driver calls ``before_epoch`` (outside the epoch timer: work there that trains,
    such as AdaQP's reassignment, is measured on ``overheads`` and its messages go under the
    ``OVERHEAD`` category), then ``train_step`` (timed) and, on evaluation epochs,
    ``settle_training`` (timed: training messages still in flight are waited for and charged to
    the epoch; before a checkpoint too, and a trainer whose evaluation reads nothing in flight sets
    ``settles_for_evaluation = False`` to keep them in flight across evaluation) and ``evaluate``;
    then ``epoch_sums`` (this rank's summands, summed over ranks by the driver) and ``row_fields`` (the row's loss and
    the trainer's own fields, from those sums).
    ``finish`` ends training and adds summary keys.
    """

    metric: str = "accuracy"  # accuracy | micro_f1: how evaluation counts become scores
    row_categories = RowCategories()
    settles_for_evaluation: bool = True  # settle_training before every evaluation (False: only before checkpoints)
    setup_comm_bytes: float = 0.0  # one-off setup messages, all ranks

    def stateful(self) -> dict:
        """The parts a checkpoint holds (``state_dict``/``load_state_dict``; None: not in this run)."""
        return {}

    def loop_state(self) -> dict:
        """More of the loop's own state for a checkpoint (besides epoch, history and best)."""
        return {}

    def load_loop_state(self, state: dict) -> None:
        pass

    @property
    def overheads(self) -> OverheadClock:
        """Where the trainer measures its work outside epochs (setup included), by kind."""
        if "_overheads" not in self.__dict__:
            self._overheads = OverheadClock()
        return self._overheads

    def before_epoch(self, epoch: int) -> None:
        pass

    def train_step(self, epoch: int) -> None:
        raise NotImplementedError

    def settle_training(self) -> None:
        """Wait for this epoch's training messages still in flight (strategies that post ahead)."""

    def evaluate(self) -> torch.Tensor:
        """This rank's ``split_counts`` (float64) of the train, val and test splits."""
        raise NotImplementedError

    def epoch_sums(self, evaluated: bool) -> dict[str, float | torch.Tensor]:
        """This rank's summands of the epoch's row: "loss" and any more the trainer needs."""
        raise NotImplementedError

    def row_fields(self, epoch: int, sums: dict[str, float], evaluated: bool) -> dict:
        """The row's "loss" and the trainer's own fields, from ``epoch_sums`` summed over ranks."""
        return {"loss": sums["loss"]}

    def finish(self, history: list[dict]) -> dict:
        """Close what training left open; the trainer's summary keys. Collective."""
        return {}


def run_epochs(
    trainer: Trainer,
    tcfg,
    comm: Communicator,
    on_epoch: EpochCallback | None = None,
    device: torch.device = torch.device("cpu"),
    run_dir: Path | None = None,
    resume: bool = False,
) -> dict:
    """Train for ``tcfg.epochs`` epochs (``tcfg`` = cfg.trainer), fewer where ``early_stop`` says so; return the run
    summary (identical on every rank; its ``stopped_early`` says why a run ended before its last epoch, else None).

    With ``run_dir``, every ``tcfg.checkpoint_every`` epochs each rank checkpoints its state there;
    ``resume`` continues from the latest checkpoint, and on CPU the run then ends exactly as an
    uninterrupted one would (times aside). ``on_epoch`` gets every row as it is made.
    """
    checkpoints = Checkpoints(tcfg.checkpoint_every, run_dir, comm)
    history: list[dict] = []
    best = {"val": None, "test": None, "epoch": None}
    first_epoch = 1
    if resume:
        loop_state = checkpoints.restore(trainer.stateful(), device)
        history, best, first_epoch = loop_state["history"], loop_state["best"], loop_state["epoch"] + 1
        trainer.load_loop_state(loop_state)
    fault = FaultInjector.from_env(comm.rank)
    stopped = None
    clock = trainer.overheads  # holds the setup's overheads (the trainer's constructor) until the first row takes them
    for epoch in range(first_epoch, tcfg.epochs + 1):
        fault.check(epoch)
        evaluated = epoch % tcfg.eval_every == 0 or epoch == tcfg.epochs
        # Messages in flight are settled inside the epoch before a checkpoint (which holds them) and an evaluation.
        row = run_epoch(trainer, epoch, evaluated, comm, device, settle=checkpoints.due(epoch))
        best = update_best(best, row)
        history.append(row)
        if on_epoch is not None:
            on_epoch(row)  # the row is kept (metrics.jsonl, W&B) even when its loss stops the run
        check_loss(row, tcfg.nonfinite_loss, comm.rank)
        if checkpoints.due(epoch):
            loop_state = {"epoch": epoch, "history": history, "best": best, **trainer.loop_state()}
            with clock.measure("checkpoint"):  # charged to the next epoch's row (the last one's: to the summary only)
                checkpoints.save(epoch, trainer.stateful(), loop_state, device)
        stopped = early_stop(tcfg, history)
        if stopped is not None:
            break

    extras = trainer.finish(history)
    trailing = reduce_overheads(clock, comm, device)  # after the last row: its checkpoint
    host_mib, gpu_mib = peak_memory_mib(comm, device)
    summary = summarize(
        history, best, trainer.setup_comm_bytes, host_mib, comm.world_size, metric=trainer.metric, trailing=trailing
    )
    summary["device"] = device.type
    summary["stopped_early"] = stopped
    summary.update(extras)
    summary["checkpoints"] = checkpoints.describe()
    summary["cpus_per_rank"] = comm.all_gather_object(sorted(os.sched_getaffinity(0)), category=CONTROL)
    summary["threads_per_rank"] = torch.get_num_threads()
    if gpu_mib is not None:
        summary["peak_gpu_memory_mib_per_rank"] = [round(m, 1) for m in gpu_mib]
    return summary


def run_epoch(
    trainer: Trainer, epoch: int, evaluated: bool, comm: Communicator, device: torch.device, settle: bool = False
) -> dict:
    """One epoch's step, evaluation and row; the row's sums and maxes are reduced over ranks.

    ``settle`` (implied by ``evaluated`` unless the trainer's ``settles_for_evaluation`` is False): wait for
    the epoch's training messages still in flight inside its timer.
    """
    f64 = {"dtype": torch.float64, "device": device}
    trainer.before_epoch(epoch)
    overhead = reduce_overheads(trainer.overheads, comm, device)  # setup (first row), last checkpoint, before_epoch
    comm.stats.reset()
    trace = comm.stats.trace  # trainer.trace=true: the epoch's messages on a timeline (gnnq.comm.trace)
    t0 = time.perf_counter()
    if trace is not None:
        trace.begin_epoch(epoch, t0)
    trainer.train_step(epoch)
    if settle or (evaluated and trainer.settles_for_evaluation):
        trainer.settle_training()  # a message of this epoch still in flight is this epoch's wait, not evaluation's
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    epoch_time = time.perf_counter() - t0
    if trace is not None:
        trace.end_epoch(epoch_time)  # written now, after the timer
    traffic = trainer.row_categories
    comm_time = comm.stats.total_seconds(
        *traffic.train, *traffic.grad
    )  # before evaluation: its waits are not training's
    halo_comm_time = comm.stats.total_seconds(
        *traffic.train
    )  # of it, the training messages' (not the gradient all-reduce)
    transfer_time = comm.stats.total_transfer_seconds(*traffic.train, *traffic.grad)
    codec_time = comm.stats.total_codec_seconds(*traffic.train)

    counts = trainer.evaluate() if evaluated else torch.zeros(NUM_COUNTS, **f64)
    own = trainer.epoch_sums(evaluated)
    names = [k for k in own if k != "loss"]  # the trainer's sums first, then the loss, the bytes and the counts
    head = [*(float(own[k]) for k in names), float(own["loss"])]
    byte_counts = [
        comm.stats.total_bytes(*traffic.train),
        comm.stats.total_bytes(*traffic.grad),
        comm.stats.total_bytes(*traffic.eval),
    ]
    sums = torch.cat([torch.tensor(head + byte_counts, **f64), counts])
    maxes = torch.tensor(
        [epoch_time, comm_time, epoch_time - comm_time, transfer_time, codec_time, halo_comm_time], **f64
    )
    comm.all_reduce(sums, category=CONTROL)
    comm.all_reduce(maxes, category=CONTROL, op=torch.distributed.ReduceOp.MAX)

    n = len(names)
    reduced = dict(zip(names, sums[:n].tolist()))
    reduced["loss"] = sums[n].item()
    fields = trainer.row_fields(epoch, reduced, evaluated)
    scores = metrics_from_counts(sums[n + 4 :], trainer.metric) if evaluated else dict.fromkeys(SPLITS)
    return {
        "epoch": epoch,
        "loss": fields.pop("loss"),
        **scores,
        "epoch_time_s": maxes[0].item(),
        "comm_time_s": maxes[1].item(),
        "compute_time_s": maxes[2].item(),
        "transfer_time_s": maxes[3].item(),
        "codec_time_s": maxes[4].item(),
        "halo_comm_time_s": maxes[5].item(),
        "comm_bytes": int(sums[n + 1].item()),
        "grad_sync_bytes": int(sums[n + 2].item()),
        "eval_comm_bytes": int(sums[n + 3].item()),
        **overhead,
        **fields,
    }


def reduce_overheads(clock: OverheadClock, comm: Communicator, device: torch.device) -> dict:
    """What ``clock`` measured since its last take, as row fields; collective.

    ``overhead_time_s`` is the slowest rank's total, ``overhead_by_kind`` each kind's slowest rank,
    ``overhead_bytes`` the ``OVERHEAD`` bytes all ranks sent (taken from the counters, which the
    epoch's start then resets).
    """
    own = clock.take()
    vec = torch.tensor([sum(own), *own], dtype=torch.float64, device=device)
    comm.all_reduce(vec, category=CONTROL, op=torch.distributed.ReduceOp.MAX)
    sent = torch.tensor([float(comm.stats.total_bytes(OVERHEAD))], dtype=torch.float64, device=device)
    comm.all_reduce(sent, category=CONTROL)
    values = vec.tolist()
    return {
        "overhead_time_s": values[0],
        "overhead_by_kind": dict(zip(OVERHEAD_KINDS, values[1:])),
        "overhead_bytes": int(sent.item()),
    }


def check_loss(row: dict, policy: str, rank: int) -> None:
    """Stop on a NaN or inf training loss (``trainer.nonfinite_loss=error``), or say so once per epoch (``warn``).

    The loss is the cross-rank sum, so every rank decides alike.
    """
    loss = row["loss"]
    if loss is None or math.isfinite(loss):
        return
    what = f"the training loss is {loss} at epoch {row['epoch']}"
    if policy == "error":
        raise NonFiniteLossError(f"{what}; the run stopped (trainer.nonfinite_loss=warn goes on regardless)")
    if rank == 0:  # the launcher shows the ranks' warning lines
        print(f"{RANK_WARNING_PREFIX} {what} (trainer.nonfinite_loss=warn)", flush=True)


def early_stop(tcfg, history: list[dict]) -> dict | None:
    """Why the run ends after its last row before ``trainer.epochs`` (``{"epoch", "reason"}``), or None.

    ``trainer.stop_at_val``: the row's validation metric reached it; ``trainer.stop_after_s``: training time (epoch
    times and overheads, as the report's time to target counts them, gnnq.report.curves.read_curve) passed it. Every
    rank holds the same rows (reduced over ranks), so every rank stops after the same epoch without a message."""
    row = history[-1]
    target = tcfg.get("stop_at_val")
    if target is not None and row["val"] is not None and row["val"] >= target - TARGET_SLACK:
        return {"epoch": row["epoch"], "reason": f"validation {row['val']:.4f} reached trainer.stop_at_val={target}"}
    limit = tcfg.get("stop_after_s")
    if limit is not None:
        elapsed = sum((r.get("epoch_time_s") or 0.0) + (r.get("overhead_time_s") or 0.0) for r in history)
        if elapsed > limit:
            reason = f"training time {elapsed:.2f} s passed trainer.stop_after_s={limit}"
            return {"epoch": row["epoch"], "reason": reason}
    return None


def update_best(best: dict, row: dict) -> dict:
    """Best validation so far: a row's val must beat the best one strictly (ties keep the earlier epoch)."""
    if row["val"] is not None and (best["val"] is None or row["val"] > best["val"]):
        return {"val": row["val"], "test": row["test"], "epoch": row["epoch"]}
    return best


def peak_memory_mib(comm: Communicator, device: torch.device) -> tuple[list[float], list[float] | None]:
    """Every rank's peak resident memory and, on CUDA, peak allocated GPU memory (MiB). Collective."""
    peak = torch.zeros(2, comm.world_size, dtype=torch.float64, device=device)
    peak[0, comm.rank] = peak_rss_mib()
    if device.type == "cuda":
        peak[1, comm.rank] = torch.cuda.max_memory_allocated(device) / 2**20
    comm.all_reduce(peak, category=CONTROL)
    return peak[0].tolist(), peak[1].tolist() if device.type == "cuda" else None


def summarize(
    history: list[dict],
    best: dict,
    setup_bytes: float,
    peak_mib: list[float],
    world_size: int,
    metric: str,
    trailing: dict | None = None,
) -> dict:
    """The run summary from its rows; ``trailing``: overheads after the last row (its checkpoint)."""

    def median(key):
        vals = [r[key] for r in history if r.get(key) is not None]  # rows of an older gnnq (resumed) may lack a key
        return statistics.median(vals) if vals else None

    def mean_int(key):  # bytes may vary by epoch under later strategies: total / epochs
        return sum(r[key] for r in history) // len(history) if history else 0

    last = history[-1] if history else {}
    charged = [r for r in history if "overhead_by_kind" in r] + ([trailing] if trailing else [])
    by_kind = {k: sum(r["overhead_by_kind"][k] for r in charged) for k in OVERHEAD_KINDS}
    overhead_total = sum(r["overhead_time_s"] for r in charged)
    training_time = sum(r["epoch_time_s"] for r in history) + overhead_total
    return {
        "metric": metric,
        "epochs": len(history),
        "best_val": best["val"],
        "test": best["test"],
        "best_epoch": best["epoch"],
        "final_loss": last.get("loss"),
        "final_train": last.get("train"),
        "final_val": last.get("val"),  # the last epoch's: what pdADMM-G's authors report (test above: at the best val)
        "final_test": last.get("test"),
        "epoch_time_s": median("epoch_time_s"),
        "comm_time_s": median("comm_time_s"),
        "compute_time_s": median("compute_time_s"),
        "transfer_time_s": median("transfer_time_s"),
        "codec_time_s": median("codec_time_s"),
        "halo_comm_time_s": median("halo_comm_time_s"),
        "comm_bytes_per_epoch": mean_int("comm_bytes"),
        "grad_sync_bytes_per_epoch": mean_int("grad_sync_bytes"),
        "eval_comm_bytes_per_epoch": mean_int("eval_comm_bytes"),  # evaluation traffic averaged over all epochs
        "setup_comm_bytes": int(setup_bytes),
        "overhead_time_s": overhead_total,  # as in the rows: a total; by kind beside it
        "overhead_by_kind": by_kind,
        "overhead_bytes": sum(r["overhead_bytes"] for r in charged),
        "training_time_s": training_time,  # epoch times and overheads: what time to target and throughput count
        "throughput_epochs_per_s": len(history) / training_time if history and training_time > 0 else None,
        "peak_memory_mib_per_rank": [round(m, 1) for m in peak_mib],
        "world_size": world_size,
    }


def epoch_trainer(name: str, build: Callable[..., Trainer], doc: str, checkpoints: bool = True, around=None) -> TrainFn:
    """A trainer of the one signature (``TrainFn``), written once, to be bound to ``name`` ("module:function", what
    the registry names and pickle finds): ``build(cfg, part, comm, device, cache_dir)`` makes the Trainer that
    ``run_epochs`` runs. ``checkpoints=False``: ``run_dir`` and ``resume`` are not used;
    ``around(run, cfg, part, comm, run_dir, resume)``: runs ``run()`` inside what it sets up (a trace)."""

    def train(
        cfg,
        part,
        comm: Communicator,
        on_epoch: EpochCallback | None = None,
        device: torch.device = torch.device("cpu"),
        cache_dir: Path | None = None,
        run_dir: Path | None = None,
        resume: bool = False,
    ) -> dict:
        trainer = build(cfg, part, comm, device, cache_dir)
        if not checkpoints:
            run_dir, resume = None, False

        def run() -> dict:
            return run_epochs(trainer, cfg.trainer, comm, on_epoch, device, run_dir, resume)

        return run() if around is None else around(run, cfg, part, comm, run_dir, resume)

    train.__doc__ = doc
    train.__module__, _, train.__qualname__ = name.partition(":")
    train.__name__ = train.__qualname__
    return train
