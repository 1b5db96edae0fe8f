"""PipeQS (ECML-PKDD 2025; suupahako/PipeQS-code): PipeGCN's pipeline with adaptive message widths and staleness.

Each hidden layer's forward halo rows and backward halo gradients are pipelined as in ``parallel=stale`` (last
epoch's message, folded just before use), but every message carries a width of its own and may be skipped:

- **Decision** (``decide``; PipeQS ``Buffer.adaptive_bit_allocation``): for each (layer, direction) in each epoch
  after the first, rank 0 polls whether last epoch's message has arrived. Arrived: the width rule runs and the
  message is refreshed (folded, and this epoch's rows posted). Not arrived and the rows changed a lot last time
  (``need_stale`` false): wait for it and refresh at the current width. Otherwise skip: the cached rows (gradients)
  are reused, nothing is posted, and the message stays in flight. Rank 0's decision reaches every rank as one byte
  per peer (``HaloExchange.share_byte``, counted with the layer's bytes of that direction). ``max_staleness`` > 0
  (gnnq; the code declares ``STALE_THRESHOLD`` but never reads it) forces a refresh once the cached rows have been
  reused that many epochs in a row.
- **Width rule** (``WidthState.assign``; PipeQS ``Buffer.bit_assigner``): d = (1 - cos(old, new)) / 2 between the
  last two received copies of the layer's halo rows (backward: of the returned gradients, summed per sent row).
  d > ``threshold`` (E): rows must not go stale; after skipped epochs the width falls back to the narrowest and the
  count q takes the number of skips, else the width steps up one option when sigmoid(K d / q) > 1/2 (always, as
  d > 0) and down otherwise, and q grows by one. d <= E: the rows may go stale. ``bit_options`` lists the widths
  (32: exact fp32 rows); the first epoch sends at the first option.
- A layer whose forward message was skipped has no backward exchange in that epoch (the code registers no gradient
  hook on the rows it reuses): its inner rows get no returned gradients, and nothing is sent.

Evaluation is exact; layer-0 inputs are fetched once (PipeQS's ``--use-pp`` precomputes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import HaloExchange
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.stale import StaleStrategy

SKIP = 0  # the decision byte of a skipped message; a refresh sends 1 + the index of its width in bit_options


@dataclass
class WidthState:
    """PipeQS's per-(layer, direction) counters: the width index, skips since the last refresh (``stale``), the
    refresh count q, and whether the rows may go stale."""

    index: int = 0
    stale: int = 0
    q: int = 0
    need_stale: bool = True

    def assign(self, old: torch.Tensor | None, new: torch.Tensor | None, threshold: float, k: float, top: int) -> int:
        """PipeQS ``bit_assigner``: update the counters from the last two received copies; the new width index."""
        if old is None or new is None:
            return self.index
        d = change(old, new)
        if d > threshold:
            self.need_stale = False
            if self.stale > 0:
                self.q, self.stale, self.index = self.stale, 0, 0
            else:
                z = torch.tensor(k * d, dtype=torch.float32) / torch.tensor(float(self.q))  # q = 0: inf, as the code
                self.index = min(self.index + 1, top) if torch.sigmoid(z) > 0.5 else max(self.index - 1, 0)
                self.q += 1
        else:
            self.need_stale = True
        return self.index


def change(old: torch.Tensor, new: torch.Tensor) -> float:
    """(1 - cos(old, new)) / 2 over all values: 0 same direction, 1/2 orthogonal (or a zero copy), 1 opposite."""
    cos = torch.nn.functional.cosine_similarity(old.flatten().float(), new.flatten().float(), dim=0)
    return float((1 - cos) / 2)


def decide(arrived: bool, need_stale: bool, age: int, max_staleness: int) -> str:
    """ "assign" (arrived: run the width rule, refresh), "wait" (refresh at the current width) or "skip"."""
    if arrived:
        return "assign"
    if not need_stale or (max_staleness > 0 and age >= max_staleness):
        return "wait"
    return "skip"


class PipeQSStrategy(StaleStrategy):
    config_keys: ClassVar[dict[str, str]] = {
        "warmup": "warmup",
        "stale_rows": "stale_rows",
        "bit_options": "bit_options",
        "threshold": "threshold",
        "steepness": "steepness",
        "adaptive": "adaptive",
        "max_staleness": "max_staleness",
    }

    def __init__(
        self,
        exchange: HaloExchange,
        graph: LocalGraph,
        x_inner: torch.Tensor,
        bit_options=(2, 4, 8, 32),
        threshold: float = 0.1,
        steepness: float = 10.0,
        adaptive: bool = True,
        max_staleness: int = 0,
        warmup: str = "sync",
        stale_rows: str = "post_dropout",
        inputs: str = "once",
    ):
        super().__init__(exchange, graph, x_inner, warmup=warmup, stale_rows=stale_rows, inputs=inputs)
        bad = [b for b in bit_options if b not in (1, 2, 4, 8, 32)]
        if not bit_options or bad or len(bit_options) > 255:
            raise ValueError(f"parallel.bit_options={list(bit_options)}: each of 1, 2, 4, 8 or 32 (exact fp32 rows)")
        if threshold < 0 or not math.isfinite(steepness) or max_staleness < 0:
            raise ValueError("parallel.threshold and parallel.max_staleness must be >= 0, parallel.steepness finite")
        self.bit_options = [int(b) for b in bit_options]
        self.threshold, self.steepness, self.adaptive = float(threshold), float(steepness), bool(adaptive)
        self.max_staleness = int(max_staleness)
        self.widths = {}  # (direction, layer) -> WidthState (rank 0's decides)
        self.previous = {}  # (direction, layer) -> the copy received before the current one (for the width rule)
        self.age = {}  # (direction, layer) -> epochs in a row its cached rows were reused
        self.fwd_bits = {}  # layer -> this epoch's forward width (a backward "wait" sends at it, as the code)
        self.skipped = {}  # layer -> the last epoch whose forward message was skipped
        self.decisions = {"assign": 0, "wait": 0, "skip": 0}
        self.log = {}  # "layer.direction" -> [width sent (0: skipped, -1: no exchange), whether a decision was shared]

    def begin_training_epoch(self, epoch: int) -> None:
        super().begin_training_epoch(epoch)
        self.log = {}

    def epoch_fields(self) -> dict:
        return {"messages": dict(self.log)}

    def _state(self, key) -> WidthState:
        return self.widths.setdefault(key, WidthState())

    def _copy(self, direction: Direction, layer: int) -> torch.Tensor | None:
        """The current received copy the width rule compares: halo rows, or returned gradients summed per row."""
        rows = self._store(direction).get(layer)
        if rows is None or not direction.returns_gradients:
            return rows
        summed = rows.new_zeros((self.graph.num_rows, rows.shape[1]))
        return summed.index_add_(0, self.exchange.send_idx, rows)

    def _fold(self, direction: Direction, layer: int) -> None:
        if (direction, layer) in self.in_flight:
            self.previous[(direction, layer)] = self._copy(direction, layer)
        super()._fold(direction, layer)

    def exchange_rows(self, direction: Direction, layer: int, rows: torch.Tensor) -> torch.Tensor:
        key, store = (direction, layer), self._store(direction)
        name = f"{layer}.{direction.value}"
        if direction.returns_gradients and self.skipped.get(layer) == self.traffic.epoch:
            self.log[name] = [-1, False]
            return rows.new_zeros((self._buffer_rows(direction), rows.shape[1]))  # no hook, no message
        state = self._state(key)
        if not self.adaptive:  # the code's STALE=False: PipeGCN's pipeline, every message at the first width
            self.log[name] = [self.bit_options[0], False]
            return self._refresh(direction, layer, rows, self.bit_options[0])
        if layer not in store:  # the first epoch: as parallel=stale's warm-up, at the first width
            bits = self.bit_options[state.index] if not direction.returns_gradients else self.fwd_bits.get(layer)
            self.log[name] = [bits, False]
            return self._refresh(direction, layer, rows, bits)
        value = SKIP
        if self.exchange.comm.rank == 0:
            value = self._choose(direction, layer, state)
        value = self.exchange.share_byte(value, layer, self.traffic, direction)[0]
        self.log[name] = [self.bit_options[value - 1] if value else 0, True]
        if value == SKIP:
            self.age[key] = self.age.get(key, 0) + 1
            if not direction.returns_gradients:
                self.skipped[layer] = self.traffic.epoch
            return store[layer]
        return self._refresh(direction, layer, rows, self.bit_options[value - 1])

    def _choose(self, direction: Direction, layer: int, state: WidthState) -> int:
        """Rank 0's decision byte for (direction, layer) this epoch."""
        key = (direction, layer)
        choice = decide(self._arrived(key), state.need_stale, self.age.get(key, 0), self.max_staleness)
        self.decisions[choice] += 1
        if choice == "skip":
            state.stale += 1
            return SKIP
        if choice == "assign":
            index = state.assign(
                self.previous.get(key),
                self._copy(direction, layer),
                self.threshold,
                self.steepness,
                len(self.bit_options) - 1,
            )
            return 1 + index
        if direction.returns_gradients and layer in self.fwd_bits:
            return 1 + self.bit_options.index(self.fwd_bits[layer])
        return 1 + state.index

    def _arrived(self, key) -> bool:
        """Whether last epoch's message of ``key`` has arrived (rank 0 polls it; the code: its transfer thread's
        event). Timing decides, so runs with skips are not bit-reproducible, as in the code."""
        pending = self.in_flight.get(key)
        return pending is None or pending.is_completed()

    def _refresh(self, direction: Direction, layer: int, rows: torch.Tensor, bits: int | None = None) -> torch.Tensor:
        self.age[(direction, layer)] = 0
        if not direction.returns_gradients:
            self.fwd_bits[layer] = bits
        return super()._refresh(direction, layer, rows, bits)

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["pipeqs"] = {
            "widths": [[d.value, layer, s.index, s.stale, s.q, s.need_stale] for (d, layer), s in self.widths.items()],
            "age": [[d.value, layer, a] for (d, layer), a in self.age.items()],
            "previous": [[d.value, layer, r] for (d, layer), r in self.previous.items() if r is not None],
            "fwd_bits": [[layer, b] for layer, b in self.fwd_bits.items() if b is not None],
        }
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        own = state.get("pipeqs", {})
        device = self.x_halo.device
        self.widths = {(Direction(d), layer): WidthState(i, s, q, bool(n)) for d, layer, i, s, q, n in own["widths"]}
        self.age = {(Direction(d), layer): a for d, layer, a in own["age"]}
        self.previous = {(Direction(d), layer): r.to(device) for d, layer, r in own["previous"]}
        self.fwd_bits = {layer: b for layer, b in own["fwd_bits"]}

    def describe(self) -> dict:
        """How often rank 0 chose each decision, and the widths at the end (for the run record)."""
        widths = {
            f"{layer}.{d.value}": self.bit_options[s.index]
            for (d, layer), s in sorted(self.widths.items(), key=lambda kv: (kv[0][1], kv[0][0].value))
        }
        return {"decisions": dict(self.decisions), "final_bits": widths}
