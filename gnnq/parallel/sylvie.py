"""Sylvie (arXiv 2303.01277; zxmeng98/Sylvie): low-bit halo rows by node importance, and a Bounded Staleness Adaptor.

As its training loop runs (train.py with ``helper/feature_buffer_degree.py``'s ``DegreeBuffer``):

- **Widths by importance** (``helper/utils.py: boundary_imp_group``): for each peer, the rows an owner sends it are
  ranked by in-degree: importance = the fraction of that peer's rows whose in-degree is at most the row's. With
  base width b the widths [1, 2, 4, 8] from b up split the importance range evenly: b = 1: [0, .25) 1 bit,
  [.25, .5) 2, [.5, .75) 4, [.75, 1] 8; b = 2: [0, .33) 2, [.33, .67) 4, [.67, 1] 8; b = 4: [0, .5) 4, [.5, 1] 8;
  b = 8: every row 8 bits. A halo row's gradient goes back at its row's width. The receiver learns its halo rows'
  in-degrees once, at setup (counted setup bytes), and computes the same widths.
- **Codec**: stochastic rounding per row with min and scale (the uniform codec, ``quantizer=uniform``) and the row
  parameters in fp16 (``quantizer.param_dtype=fp16``).
- **Bounded Staleness Adaptor** (train.py's epoch loop, "Epoch-adaptive part"): after each epoch the loss is
  smoothed, f = 0.9 f + 0.1 loss; from epoch 5 on its rate |f - f_old| (per second in the code, per epoch here)
  enters a window of the last 5; from epoch 9 on, a window that never rises doubles b (up to 8) and one that never
  falls halves it (down to 1). b rising switches to synchronous exchange (every layer waits for current rows), b
  falling to the pipeline (last epoch's rows, as ``parallel=stale``). b starts at 1; ``pipeline`` says how the run
  starts (the code's ``--enable_pipeline``). Every rank decides alike from the run's loss (the code: rank 0 from its
  own, sent to the others).
- In the pipeline, the first epoch uses zero rows (``warmup=zeros``) and the rows are those before dropout
  (``stale_rows=pre_dropout``: the code exchanges before the layer's dropout); a message still in flight when the
  adaptor switches to synchronous exchange is waited for and its rows replaced by the synchronous ones.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import SETUP, HaloExchange
from gnnq.comm.wire_layout import WireLayout
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.stale import StaleStrategy

WIDTHS = (1, 2, 4, 8)
# importance cut points per base width (helper/utils.py boundary_imp_group): len(widths from base) + 1 each
CUTS = {1: (0.0, 0.25, 0.5, 0.75), 2: (0.0, 0.33, 0.67), 4: (0.0, 0.5), 8: (0.0,)}


def importance(degrees: torch.Tensor) -> torch.Tensor:
    """Each row's importance among ``degrees`` (one peer's rows): the fraction with in-degree at most its own."""
    if degrees.numel() == 0:
        return degrees.new_zeros(0, dtype=torch.float64)
    deg = degrees.round().long()
    at_most = torch.cumsum(torch.bincount(deg), 0)
    return at_most[deg].double() / degrees.numel()


def row_widths(degrees: torch.Tensor, base: int) -> torch.Tensor:
    """The width of each row of one peer's segment at base width ``base``."""
    imp, cuts = importance(degrees), CUTS[base]
    widths = WIDTHS[WIDTHS.index(base) :]
    group = torch.bucketize(imp, torch.tensor(cuts[1:], dtype=torch.float64), right=True)
    return torch.tensor(widths, dtype=torch.int64)[group]


def segment_widths(degrees: torch.Tensor, counts: list[int], base: int) -> torch.Tensor:
    """``row_widths`` for each peer's segment of a buffer grouped by peer (``counts`` rows each)."""
    parts = torch.split(degrees, counts)
    return torch.cat([row_widths(p, base) for p in parts]) if parts else degrees.new_zeros(0, dtype=torch.int64)


@dataclass
class Adaptor:
    """Sylvie's Bounded Staleness Adaptor: the base width and whether the exchange is pipelined."""

    base: int = 1
    pipeline: bool = True
    smoothing: float = 0.9
    first_rate_epoch: int = 5
    first_change_epoch: int = 9
    low: int = 1
    high: int = 8
    smoothed: float | None = None
    window: deque = field(default_factory=lambda: deque([0.0] * 5, maxlen=5))

    def observe(self, epoch: int, loss: float) -> None:
        """Take epoch ``epoch``'s loss; may change ``base`` and ``pipeline`` for the next epoch."""
        if self.smoothed is None or epoch == 0:
            self.smoothed = loss
            return
        old = self.smoothed
        self.smoothed = self.smoothing * old + (1 - self.smoothing) * loss
        if epoch < self.first_rate_epoch:
            return
        self.window.append(abs(self.smoothed - old))
        if epoch < self.first_change_epoch:
            return
        w, before = list(self.window), self.base
        if all(w[k] <= w[k - 1] for k in range(1, len(w))) and self.base < self.high:
            self.base *= 2
        if all(w[k] >= w[k - 1] for k in range(1, len(w))) and self.base > self.low:
            self.base //= 2
        if self.base > before:
            self.pipeline = False
        elif self.base < before:
            self.pipeline = True

    def state(self) -> list:
        return [self.base, self.pipeline, self.smoothed, list(self.window)]

    def load(self, state: list) -> None:
        self.base, self.pipeline, self.smoothed = int(state[0]), bool(state[1]), state[2]
        self.window = deque(state[3], maxlen=5)


class SylvieStrategy(StaleStrategy):
    config_keys: ClassVar[dict[str, str]] = {
        "warmup": "warmup",
        "stale_rows": "stale_rows",
        "base_bits": "base_bits",
        "pipeline": "pipeline",
        "adaptive": "adaptive",
    }

    def __init__(
        self,
        exchange: HaloExchange,
        graph: LocalGraph,
        x_inner: torch.Tensor,
        pipeline: bool = True,
        base_bits: int = 1,
        adaptive: bool = True,
        warmup: str = "sync",
        stale_rows: str = "post_dropout",
        inputs: str = "once",
    ):
        super().__init__(exchange, graph, x_inner, warmup=warmup, stale_rows=stale_rows, inputs=inputs)
        if base_bits not in WIDTHS:
            raise ValueError(f"parallel.base_bits={base_bits}: allowed {', '.join(map(str, WIDTHS))}")
        self.adaptor = Adaptor(base=int(base_bits), pipeline=bool(pipeline))
        self.adaptive = bool(adaptive)
        self.send_degrees, self.recv_degrees = self._degrees()
        self.layouts = {}  # (base, direction) -> WireLayout
        self.bases = []  # the base width of each training epoch
        self.pipelined = []  # whether each training epoch ran pipelined
        exchange.take_widths_from(self)

    def _degrees(self) -> tuple[torch.Tensor, torch.Tensor]:
        """In-degrees of the rows this rank sends (in send order) and of its halo rows (from their owners, at setup).

        An inner row's in-edges are all local, so its CSR row length is its in-degree in the whole graph."""
        own = self.graph.matrix.crow_indices().diff().to(torch.float32).unsqueeze(1)
        send = own.index_select(0, self.exchange.send_idx.to(own.device)).flatten()
        recv = self.exchange.start(own, 0, Direction.INPUT, SETUP, bits=32).wait().flatten()
        return send.cpu(), recv.cpu()

    # RowWidths (gnnq.comm.halo): the exchange asks it for each training message's per-row widths
    def layout(self, layer: int, direction: Direction) -> WireLayout | None:
        if direction is Direction.INPUT:
            return None
        key = (self.adaptor.base, direction)
        if key not in self.layouts:
            ex = self.exchange
            send = segment_widths(self.send_degrees, ex.send_counts, self.adaptor.base)
            recv = segment_widths(self.recv_degrees, ex.recv_counts, self.adaptor.base)
            if direction.returns_gradients:  # a halo row's gradient goes back at its row's width
                self.layouts[key] = WireLayout(recv, ex.recv_counts, send, ex.send_counts)
            else:
                self.layouts[key] = WireLayout(send, ex.send_counts, recv, ex.recv_counts)
        return self.layouts[key]

    def traces(self, epoch: int) -> bool:
        return False

    def record_ranges(self, layer: int, direction: Direction, ranges: torch.Tensor) -> None:
        pass

    def begin_training_epoch(self, epoch: int) -> None:
        super().begin_training_epoch(epoch)
        self.bases.append(self.adaptor.base)
        self.pipelined.append(self.adaptor.pipeline)

    def epoch_fields(self) -> dict:
        return {"base_bits": self.bases[-1], "pipelined": self.pipelined[-1]}

    def end_training_epoch(self, epoch: int, loss: float) -> None:
        if self.adaptive:
            self.adaptor.observe(epoch, loss)

    def exchange_rows(self, direction: Direction, layer: int, rows: torch.Tensor) -> torch.Tensor:
        if self.adaptor.pipeline:
            return super().exchange_rows(direction, layer, rows)
        self._fold(direction, layer)  # a message of the pipeline still in flight: waited for, then replaced
        store = self._store(direction)
        store[layer] = self._post(direction, layer, rows).wait()
        return store[layer]

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["sylvie"] = {"adaptor": self.adaptor.state(), "bases": self.bases, "pipelined": self.pipelined}
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.adaptor.load(state["sylvie"]["adaptor"])
        self.bases = list(state["sylvie"]["bases"])
        self.pipelined = list(state["sylvie"]["pipelined"])

    def describe(self) -> dict:
        """The base width of each epoch, and the epochs that ran pipelined (for the run record)."""
        return {"base_bits_per_epoch": list(self.bases), "pipelined_per_epoch": list(self.pipelined)}
