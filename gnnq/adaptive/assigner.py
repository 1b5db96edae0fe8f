"""AdaQP's adaptive bit-widths during training: trace, solve on rank 0, broadcast, lay out.

Every ``assign_cycle`` epochs the traced row ranges of the training messages (never of
evaluation) and the row influences α give each message row a variance weight
α² · D · Σ range² / 6 (the stochastic-rounding variance at b bits is that weight / (2^b - 1)²),
the sum over the traced epochs: with ``trace=cycle`` (AdaQP) every training epoch since the
last assignment, with ``trace=last_epoch`` only the last epoch of the cycle. Each rank sorts the rows it sends to each
peer by weight and cuts
them into groups of ``group_size``; rank 0 gathers the groups, solves one bit-width per
group for every (layer, direction) message with the per-channel time model, and broadcasts
the widths. Senders expand them to per-row widths and send those to the receivers, so
both ends of every channel hold the same layout.

The assigner is the one owner of this state: the layouts it installs, the ranges the exchange
reports to it while it traces (``record_ranges``), and both again when a run resumes
(``load_state_dict``). The exchange only reads the layouts (``take_widths_from``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from gnnq.adaptive.influence import adaqp_backward_sums, message_influence
from gnnq.adaptive.solver import SOLVERS, BitProblem, Channel
from gnnq.adaptive.time_model import PUBLISHED_STEPS, TimeModel, fit_time_model, fixed_link_model, published_sizes
from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.communicator import Communicator
from gnnq.comm.direction import Direction
from gnnq.comm.halo import HaloExchange
from gnnq.comm.wire_layout import WireLayout
from gnnq.data.part import Part
from gnnq.models.graph_ops import LocalGraph
from gnnq.track.overheads import OverheadClock

DIRECTIONS = (Direction.FORWARD, Direction.BACKWARD)


class AdaptiveAssigner:
    def __init__(
        self,
        qcfg,
        comm: Communicator,
        exchange: HaloExchange,
        graph: LocalGraph,
        model_name: str,
        dim: int,
        layers: int,
        cache_dir: Path | None = None,
        overheads: OverheadClock | None = None,
        part: Part | None = None,
        input_dim: int | None = None,
    ):
        """``overheads`` times the startup profile, the α exchange and every reassignment (outside epochs);
        ``part``: this rank's partition, needed for ``backward_influence=adaqp`` (its global out-degrees);
        ``input_dim``: the layer-0 features' width when they travel every epoch (``parallel.inputs=every_epoch``):
        their forward message then gets widths of its own, as in AdaQP's assigner (None: fetched once, no widths)."""
        self.overheads = overheads if overheads is not None else OverheadClock()
        self.cfg, self.comm, self.exchange, self.dim = qcfg, comm, exchange, dim
        self.feature_dim = int(part.x.shape[1]) if part is not None else dim  # profile_range=published reads it
        self.quant = exchange.quant
        # Keys hold the plain direction strings: they travel pickled to rank 0 and into checkpoints.
        inputs = [(0, Direction.FORWARD.value)] if input_dim is not None else []
        self.keys = inputs + [(layer, d.value) for layer in range(1, layers) for d in DIRECTIONS]
        self.dims = {key: input_dim if key[0] == 0 else dim for key in self.keys}  # row width of each message
        self.layouts: dict[tuple[int, str], WireLayout] = {}  # per (layer, direction): the widths in force
        self.range_squares: dict[tuple[int, str], torch.Tensor] = {}  # per (layer, direction): Σ range² traced
        self.bit_choices = tuple(sorted(int(b) for b in qcfg.bit_choices))
        self.row_bytes = {  # per row width: bytes of one row at each bit-width
            d: {b: self.quant.forward.at_bits(b).row_bytes(d) for b in self.bit_choices}
            for d in set(self.dims.values())
        }
        with self.overheads.measure("influence"):
            backward_sums = None
            if qcfg.backward_influence == "adaqp":
                if part is None:
                    raise ValueError(
                        "quantizer.backward_influence=adaqp needs the partition (AdaptiveAssigner part=...)"
                    )
                backward_sums = adaqp_backward_sums(model_name, part)
            self.influence = message_influence(comm, exchange, graph, model_name, cache_dir, backward_sums)
        with self.overheads.measure("profile"):
            self.time_model = self._fit_time_model()
        self.assignments: list[dict] = []
        exchange.take_widths_from(self)

    def _fit_time_model(self) -> TimeModel:
        """Profile each way's messages (what this rank sends to each peer) over the sizes of profile_range."""
        ex, c = self.exchange, self.cfg
        most_rows = [max(s, r) for s, r in zip(ex.send_counts, ex.recv_counts)]
        if c.time_model == "fixed":
            return fixed_link_model(
                self.comm, [n * self.dim * 4 for n in most_rows], c.link_gbit_per_s, c.link_latency_ms / 1e3
            )
        if c.profile_range == "fp32":
            return fit_time_model(self.comm, [n * self.dim * 4 for n in most_rows], repeats=c.profile_repeats)
        if c.profile_range == "published":
            high, low = published_sizes(most_rows, self.feature_dim, self.dim, self.bit_choices)
            return fit_time_model(self.comm, high, repeats=c.profile_repeats, steps=PUBLISHED_STEPS, low_bytes=low)
        lo, hi = self.row_bytes[self.dim][self.bit_choices[0]], self.row_bytes[self.dim][self.bit_choices[-1]]
        return fit_time_model(
            self.comm, [n * hi for n in most_rows], repeats=c.profile_repeats, low_bytes=[n * lo for n in most_rows]
        )

    def before_epoch(self, epoch: int) -> dict | None:
        """Reassign at the start of each new cycle. Returns metrics when it reassigned."""
        if epoch > 1 and (epoch - 1) % self.cfg.assign_cycle == 0:
            if self.cfg.refit_time_model and self.cfg.time_model == "profile":
                with self.overheads.measure("profile"):
                    self.time_model = self._fit_time_model()
            with self.overheads.measure("assign"):
                return self.reassign(epoch)
        return None

    # What the exchange asks (see gnnq.comm.halo.RowWidths).
    def layout(self, layer: int, direction: Direction) -> WireLayout | None:
        return self.layouts.get((layer, direction))

    def traces(self, epoch: int) -> bool:
        """Training messages are traced in every epoch (trace=cycle) or the last epoch of each cycle (never in
        evaluation)."""
        return epoch >= 1 and (self.cfg.trace == "cycle" or epoch % self.cfg.assign_cycle == 0)

    def record_ranges(self, layer: int, direction: Direction, ranges: torch.Tensor) -> None:
        key = (layer, Direction(direction).value)
        squares = ranges.double().square()
        self.range_squares[key] = (
            squares if key not in self.range_squares else self.range_squares[key].to(squares.device) + squares
        )

    def reassign(self, epoch: int) -> dict:
        started = time.perf_counter()
        groups, orders = {}, {}
        for key in self.keys:
            groups[key], orders[key] = self._local_groups(key)
        everything = self.comm.all_gather_object(groups, category=OVERHEAD)
        decided = None
        if self.comm.rank == 0:
            try:
                decided = self._solve(everything)
            except Exception as exc:  # every rank must leave the broadcast, then all raise
                decided = {"error": f"{type(exc).__name__}: {exc}"}
        decided = self.comm.broadcast_object(decided, src=0, category=OVERHEAD)
        if "error" in decided:
            raise RuntimeError(f"bit-width assignment failed on rank 0: {decided['error']}")
        for key in self.keys:
            self._install_layout(key, decided["bits"][key], orders[key])
        self.range_squares.clear()
        entry = {
            "epoch": epoch,
            "solver": self.cfg.solver,
            "solve_time_s": decided["solve_time_s"],
            "assign_time_s": time.perf_counter() - started,
            "objective": decided["objective"],
            "bits_histogram": decided["histogram"],
        }
        self.assignments.append(entry)
        return entry

    def _counts(self, direction: str) -> tuple[list[int], list[int]]:
        _, send_counts, recv_counts = self.exchange.plan.route(Direction(direction))
        return send_counts, recv_counts

    def _local_groups(self, key) -> tuple[dict, dict]:
        """Per peer: the group weights and sizes of this rank's rows to it, and each group's rows."""
        layer, direction = key
        send_counts, _ = self._counts(direction)
        alpha = self.influence[direction].double().cpu()
        squares = self.range_squares.get(key)
        squares = torch.zeros_like(alpha) if squares is None else squares.double().cpu()
        weight = (alpha * alpha * squares * (self.dims[key] / 6.0)).numpy()
        size = int(self.cfg.group_size)
        groups, orders = {}, {}
        start = 0
        for peer, count in enumerate(send_counts):
            if count and peer != self.comm.rank:
                order = start + np.argsort(-weight[start : start + count], kind="stable")
                cuts = list(range(0, count, size))
                groups[peer] = (
                    np.array([weight[order[c : c + size]].sum() for c in cuts]),
                    np.array([len(order[c : c + size]) for c in cuts], dtype=np.int64),
                )
                orders[peer] = [order[c : c + size] for c in cuts]
            start += count
        return groups, orders

    def _solve(self, everything: list[dict]) -> dict:
        """Rank 0: one problem per (layer, direction) message."""
        solve = SOLVERS[self.cfg.solver]
        options = {"time_limit_s": float(self.cfg.milp_time_limit_s)} if self.cfg.solver == "milp" else {}
        bits, histogram, seconds, objective = {}, {b: 0 for b in self.bit_choices}, 0.0, {}
        for key in self.keys:
            channels = []
            for src, groups in enumerate(everything):
                for dst, (weights, rows) in sorted(groups[key].items()):
                    fit = self.time_model.channel(src, dst)
                    channels.append(Channel(src, dst, weights, rows, fit.a, fit.c))
            problem = BitProblem(
                tuple(channels),
                self.bit_choices,
                self.row_bytes[self.dims[key]],
                float(self.cfg.variance_weight),
                self.cfg.time_objective,
                self.comm.world_size,
            )
            solution = solve(problem, **options)
            seconds += solution.solve_time_s
            objective[f"{key[0]}.{key[1]}"] = solution.objective
            bits[key] = {(ch.src, ch.dst): b for ch, b in zip(channels, solution.bits)}
            for ch, b in zip(channels, solution.bits):
                for width in self.bit_choices:
                    histogram[width] += int(ch.group_rows[b == width].sum())
        return {
            "bits": bits,
            "histogram": {str(b): n for b, n in histogram.items()},
            "solve_time_s": seconds,
            "objective": objective,
        }

    def _install_layout(self, key, bits: dict, orders: dict) -> None:
        layer, direction = key
        send_counts, recv_counts = self._counts(direction)
        send_bits = torch.zeros(sum(send_counts), dtype=torch.int64)
        for peer, group_rows in orders.items():
            for rows, width in zip(group_rows, bits[(self.comm.rank, peer)]):
                send_bits[torch.from_numpy(rows)] = int(width)
        device = self.exchange.send_idx.device
        recv_bits = self.comm.all_to_all(
            send_bits.to(torch.uint8, copy=True).to(device)[:, None],
            send_counts,
            recv_counts,
            category=OVERHEAD,
            layer=layer,
            direction=direction,
        ).flatten()
        self.layouts[key] = WireLayout(send_bits, send_counts, recv_bits.cpu(), recv_counts)

    def state_dict(self) -> dict:
        """The time model (a resumed run must not profile a different one), the assignments so far,
        the layouts in force and the squared ranges traced so far. Tensors and plain containers only."""
        return {
            "time_model": self.time_model.to_record(),
            "assignments": self.assignments,
            "layouts": [{"layer": k[0], "direction": k[1], **v.state_dict()} for k, v in sorted(self.layouts.items())],
            "range_squares": [
                {"layer": k[0], "direction": k[1], "squares": v.cpu()} for k, v in sorted(self.range_squares.items())
            ],
        }

    def load_state_dict(self, state: dict) -> None:
        self.time_model = TimeModel.from_record(state["time_model"])
        self.assignments = list(state["assignments"])
        self.layouts = {(e["layer"], e["direction"]): WireLayout.from_state_dict(e) for e in state["layouts"]}
        self.range_squares = {(e["layer"], e["direction"]): e["squares"] for e in state["range_squares"]}

    def describe(self) -> dict:
        return {
            "solver": self.cfg.solver,
            "bit_choices": list(self.bit_choices),
            "group_size": int(self.cfg.group_size),
            "variance_weight": float(self.cfg.variance_weight),
            "assign_cycle": int(self.cfg.assign_cycle),
            "trace": self.cfg.trace,
            "backward_influence": self.cfg.backward_influence,
            "profile_range": self.cfg.profile_range,
            "time_objective": self.cfg.time_objective,
            "first_cycle_bits": int(self.quant.forward.bits),
            "time_model": self.time_model.to_record(),
            "assignments": self.assignments,
            "solve_time_s_total": sum(a["solve_time_s"] for a in self.assignments),
        }
