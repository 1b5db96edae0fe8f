"""Halo exchange: forward halo rows to the ranks that need them, and their gradients back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from gnnq.comm.accounting import HALO_EVAL, HALO_SETUP, HALO_TRAIN
from gnnq.comm.codec import MessageQuantization
from gnnq.comm.communicator import Communicator, Posted, timed
from gnnq.comm.direction import Direction
from gnnq.comm.kernels.backends import Kernels, kernels_for
from gnnq.comm.trace import DECODE, ENCODE
from gnnq.comm.wire_layout import WireLayout
from gnnq.data.sparse_rows import csr_tensor


@dataclass(frozen=True, eq=False)  # compared by identity: it holds tensors
class HaloPlan:
    """Which rows move: ``send_idx`` (inner rows, grouped by destination, ``send_counts`` each)
    and ``recv_counts`` halo rows from each peer. A strategy may pass a subset of the partition's
    plan for one message (``parallel=sampling`` does); both ends must use matching subsets."""

    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]

    def route(self, direction: Direction) -> tuple[torch.Tensor | None, list[int], list[int]]:
        """(rows of the source to send, None: all of them in order; rows to each peer; rows from each peer).

        Rows go out along the plan; gradients come back along it reversed, one per halo row."""
        if direction.returns_gradients:
            return None, self.recv_counts, self.send_counts
        return self.send_idx, self.send_counts, self.recv_counts


@dataclass(frozen=True)
class Traffic:
    """What a message belongs to: its byte-accounting category and, for training, its epoch
    (which keys the quantization draws and, under adaptive widths, whether it is traced)."""

    category: str
    epoch: int = 0

    @classmethod
    def training(cls, epoch: int) -> "Traffic":
        return cls(HALO_TRAIN, int(epoch))

    @property
    def is_training(self) -> bool:
        return self.category == HALO_TRAIN


EVALUATION = Traffic(HALO_EVAL)
SETUP = Traffic(HALO_SETUP)


class RowWidths(Protocol):
    """Per-row bit-widths of training messages and the tracing they are solved from (quantizer=adaptive)."""

    def layout(self, layer: int, direction: Direction) -> WireLayout | None: ...

    def traces(self, epoch: int) -> bool: ...

    def record_ranges(self, layer: int, direction: Direction, ranges: torch.Tensor) -> None: ...


class HaloExchange:
    """Moves rows between ranks along one partition's halo plan.

    ``send_idx`` lists the inner rows sent, concatenated by destination rank
    (``send_counts``); ``recv_counts`` gives the halo rows received from each rank,
    which arrive in halo order. With ``quant``, training messages travel as quantized
    wire rows (evaluation stays exact); the byte counter sees exactly those rows.
    """

    def __init__(
        self,
        comm: Communicator,
        send_idx: torch.Tensor,
        send_counts,
        recv_counts,
        quant: MessageQuantization | None = None,
    ):
        self.comm = comm
        self.plan = HaloPlan(send_idx, [int(c) for c in send_counts], [int(c) for c in recv_counts])
        self.send_idx, self.send_counts, self.recv_counts = (
            self.plan.send_idx,
            self.plan.send_counts,
            self.plan.recv_counts,
        )
        self.num_halo = sum(self.recv_counts)
        self.quant = quant
        self.widths: RowWidths | None = None
        self.nonfinite_zeroed = 0
        self.codec_backend: str | None = None  # of the last quantized message
        self.side_streams = False  # on GPU: encode, send and decode on a stream of their own
        self._stream = None
        self._kernels: dict[str, Kernels] = {}  # per device: chosen at its first quantized message

    def use_side_stream(self) -> None:
        """Run messages on a separate CUDA stream (for overlap); no effect on CPU."""
        self.side_streams = True

    def use_own_group(self) -> None:
        """Send this exchange's messages on a process group of their own, so that collectives on
        the default group (the gradient all-reduce) never queue behind messages left in flight.
        Collective: every rank calls it, in the same order."""
        self.comm = self.comm.with_own_group()

    def take_widths_from(self, widths: RowWidths) -> None:
        """Training messages follow ``widths``' per-row layouts and report their row ranges to it
        while it traces (quantizer=adaptive). Setup: before the first training message."""
        self.widths = widths

    def fetch(
        self,
        h_inner: torch.Tensor,
        layer: int,
        traffic: Traffic,
        plan: HaloPlan | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Halo rows of ``h_inner`` from their owners (received or decoded into ``out`` if given); differentiable
        (gradients flow back to owners).

        ``traffic`` says whose message it is (training of which epoch, evaluation): the noise key depends on it."""
        if torch.is_grad_enabled() and h_inner.requires_grad:
            return _HaloFunction.apply(h_inner, self, layer, traffic, plan, out)
        return self.start(h_inner, layer, Direction.FORWARD, traffic, plan, out).wait()

    def fetch_static(self, x_inner: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Halo rows of data that never changes (input features): call once and keep the result (received
        into ``out`` when given: contiguous fp32 rows, one per halo row, as :meth:`start` takes it)."""
        return self.start(x_inner, 0, Direction.INPUT, SETUP, out=out).wait()

    def fetch_static_sparse(self, x_inner: torch.Tensor) -> torch.Tensor:
        """:meth:`fetch_static` for sparse CSR features: the halo rows as a CSR tensor, sent as their non-zeros
        only, exact (three setup messages: each row's number of non-zeros as int32, then the column indices, as
        int16 when the features are fewer than 2^15 and else int32, then the fp32 values)."""
        if self.quant is not None and self.quant.codec(Direction.INPUT) is not None:
            raise ValueError(
                "quantizer.quantize_input=true with sparse input features: their halo rows go as exact non-zeros; "
                "set quantizer.quantize_input=false"
            )
        kw = {"category": SETUP.category, "layer": 0, "direction": Direction.INPUT.accounting}
        rows, send_counts, recv_counts = self.plan.route(Direction.INPUT)
        crow, cols, values = x_inner.crow_indices(), x_inner.col_indices(), x_inner.values()
        nnz = (crow[1:] - crow[:-1]).index_select(0, rows)
        take = torch.repeat_interleave(crow[:-1].index_select(0, rows), nnz) + _ranks_within(nnz)
        recv_nnz = self.comm.all_to_all(nnz.to(torch.int32), send_counts, recv_counts, **kw).long()
        send_entries = _block_sums(nnz, send_counts)
        recv_entries = _block_sums(recv_nnz, recv_counts)
        index_dtype = torch.int16 if x_inner.shape[1] <= torch.iinfo(torch.int16).max else torch.int32
        narrow = cols.index_select(0, take).to(index_dtype)  # as bytes: gloo sends no int16
        got_cols = self.comm.all_to_all(
            narrow.view(torch.uint8).view(narrow.numel(), narrow.element_size()), send_entries, recv_entries, **kw
        ).view(index_dtype)[:, 0]
        got_values = self.comm.all_to_all(values.index_select(0, take), send_entries, recv_entries, **kw)
        crow_out = torch.zeros(recv_nnz.numel() + 1, dtype=torch.int64, device=x_inner.device)
        torch.cumsum(recv_nnz, 0, out=crow_out[1:])
        return csr_tensor(crow_out, got_cols.long(), got_values, (recv_nnz.numel(), x_inner.shape[1]))

    def fetch_into(self, h_inner: torch.Tensor, layer: int, traffic: Traffic, full: torch.Tensor) -> torch.Tensor:
        """``full`` (a reused buffer of ``h_inner``'s dtype, one row per inner and halo row) filled with
        [h_inner; halo rows]: the halo rows are received or decoded straight into ``full[num_inner:]``
        (no fresh tensor, no concatenation); differentiable like :meth:`fetch`. Returns ``full``
        detached from any earlier use (its storage, with autograd history of this call only). Gradients as
        torch.cat([h_inner, fetch(h_inner)]) gives them, bit for bit."""
        n = h_inner.shape[0]
        if full.shape != (n + self.num_halo,) + tuple(h_inner.shape[1:]) or full.dtype != h_inner.dtype:
            raise ValueError(
                f"halo buffer {full.dtype} {tuple(full.shape)} for {n} inner and {self.num_halo} halo rows "
                f"of {h_inner.dtype} {tuple(h_inner.shape[1:])}"
            )
        return _IntoBuffer.apply(h_inner, self.fetch(h_inner, layer, traffic, out=full[n:]), full)

    def start(
        self,
        src: torch.Tensor,
        layer: int,
        direction: Direction,
        traffic: Traffic,
        plan: HaloPlan | None = None,
        out: torch.Tensor | None = None,
        bits: int | None = None,
    ) -> "PendingHalo":
        """Post one message and return at once; ``.wait()`` gives the rows that arrive.

        FORWARD / INPUT: ``src`` holds inner rows and the peers' halo rows arrive (in halo order).
        BACKWARD: ``src`` holds one row per halo row (gradients) and each peer's rows come back
        in this rank's send order (add them with :meth:`add_returned`).
        ``plan`` (default: the partition's) says which rows move. ``out`` (contiguous fp32 rows, one per
        row that arrives): the rows are received or decoded into it, and ``.wait()`` returns it.
        ``bits`` (a training message of a strategy that picks each message's width, both ends alike): this message
        at that width of the direction's codec, or exact fp32 rows at 32; None: the codec's (or the row widths').
        """
        plan = plan or self.plan
        if not (self.side_streams and src.is_cuda):
            return self._start(src, layer, Direction(direction), traffic, plan, out, bits)
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=src.device)
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(src.device))  # src is ready (and out free) before the codec runs
        with torch.cuda.stream(stream):
            pending = self._start(src, layer, Direction(direction), traffic, plan, out, bits)
        src.record_stream(stream)
        pending.stream = stream
        return pending

    def _start(
        self,
        src: torch.Tensor,
        layer: int,
        direction: Direction,
        traffic: Traffic,
        plan: HaloPlan,
        out: torch.Tensor | None,
        bits: int | None = None,
    ) -> "PendingHalo":
        rows, send_counts, recv_counts = plan.route(direction)
        kw = {"category": traffic.category, "layer": layer, "direction": direction.accounting}
        encoder = self._encoder(layer, direction, traffic, src.device, plan, bits)
        if encoder is None:  # exact fp32 rows
            send = src if rows is None else src.index_select(0, rows)
            return PendingHalo(self.comm.all_to_all_start(send, send_counts, recv_counts, **kw, out=out), None)
        if rows is None:
            rows = torch.arange(src.shape[0], device=src.device)
        self._trace(layer, direction, traffic, src, rows)
        noise = self.quant.noise_key(traffic.epoch, layer, direction)
        key, stats = (kw["category"], layer, kw["direction"]), self.comm.stats
        with timed(stats, "codec", key, src, ENCODE):
            message = encoder.encode(src, rows, send_counts, noise, f"layer {layer} {direction.label}")
        self.nonfinite_zeroed += message.nonfinite_zeroed
        dim = src.shape[1]
        pending = self.comm.all_to_all_start(
            message.wire, message.send_bytes, encoder.recv_bytes(recv_counts, dim), **kw
        )

        def decode(wire: torch.Tensor) -> torch.Tensor:
            with timed(stats, "codec", key, wire, DECODE):
                return encoder.decode(wire, dim, out)

        return PendingHalo(pending, decode)

    def _encoder(
        self,
        layer: int,
        direction: Direction,
        traffic: Traffic,
        device: torch.device,
        plan: HaloPlan,
        bits: int | None = None,
    ):
        """How this message is encoded; None: it travels as exact fp32 rows (no codec, evaluation, or ``bits=32``)."""
        if self.quant is None or traffic.category == HALO_EVAL or self.quant.codec(direction) is None or bits == 32:
            return None
        kernels = self._kernels.get(str(device))
        if kernels is None:
            kernels = self._kernels[str(device)] = kernels_for(device)
        self.codec_backend = kernels.name
        if bits is not None:
            return self.quant.encoder(direction, kernels, None, bits)
        layout = self.widths.layout(layer, direction) if self.widths is not None and traffic.is_training else None
        if layout is not None and plan is not self.plan:
            raise ValueError("per-row bit-widths need the partition's full halo plan")
        return self.quant.encoder(direction, kernels, layout)

    def _trace(self, layer: int, direction: Direction, traffic: Traffic, src: torch.Tensor, rows: torch.Tensor) -> None:
        """Hand the row ranges (max - min) of a training message to the row widths, in the epochs they trace
        (on the message's device: tracing every epoch must not wait for the device)."""
        if traffic.is_training and self.widths is not None and self.widths.traces(traffic.epoch) and rows.numel():
            mn, mx = torch.aminmax(src.detach().index_select(0, rows).float(), dim=1)
            self.widths.record_ranges(layer, direction, (mx - mn).nan_to_num(0.0, 0.0, 0.0))

    def share_flags(self, flag: bool, layer: int, traffic: Traffic) -> list[bool]:
        """Tell every peer one yes/no of this rank's and hear theirs (entry q: rank q's; this rank's own
        at its index). One byte per peer, counted with ``layer``'s forward bytes of ``traffic``."""
        return [bool(v) for v in self.share_byte(int(bool(flag)), layer, traffic)]

    def share_byte(
        self, value: int, layer: int, traffic: Traffic, direction: Direction = Direction.FORWARD
    ) -> list[int]:
        """Tell every peer one byte (0..255) of this rank's and hear theirs (entry q: rank q's; this rank's own at its
        index): a decision both ends of a message must agree on. One byte per peer, counted with ``layer``'s
        ``direction`` bytes of ``traffic``."""
        world = self.comm.world_size
        send = torch.full((world, 1), int(value), dtype=torch.uint8, device=self.send_idx.device)
        got = self.comm.all_to_all(
            send, [1] * world, [1] * world, category=traffic.category, layer=layer, direction=direction.accounting
        )
        return [int(v) for v in got.flatten().tolist()]

    def add_returned(
        self, grad_inner: torch.Tensor, returned: torch.Tensor, plan: HaloPlan | None = None
    ) -> torch.Tensor:
        """Add the gradient rows peers returned for the rows this rank sent them."""
        return grad_inner.index_add_(0, (plan or self.plan).send_idx, returned)


class PendingHalo:
    """A halo message in flight; ``wait()`` returns its decoded rows."""

    def __init__(self, pending, decode, stream=None):
        self.pending, self.decode, self.stream = pending, decode, stream

    def is_completed(self) -> bool:
        """Whether the message has arrived (a poll: it waits for nothing)."""
        return self.pending.is_completed()

    def wait(self) -> torch.Tensor:
        if self.stream is None:
            return self._finish(exposed=True)
        with torch.cuda.stream(self.stream):
            out = self._finish(exposed=False)  # the side stream's wait is transfer; the consumer's below is exposed
            done = torch.cuda.Event()
            done.record(self.stream)
        current = torch.cuda.current_stream(out.device)
        waited_from = Posted(out)
        current.wait_event(done)  # the consumer's stream reads the rows only after decoding finished
        self.pending.count_consumer_wait(waited_from)
        out.record_stream(current)
        return out

    def _finish(self, exposed: bool) -> torch.Tensor:
        out = self.pending.wait(exposed=exposed)
        return out if self.decode is None else self.decode(out)


class Arrived:
    """Rows already at hand, behind the same ``wait()`` as a message in flight."""

    def __init__(self, rows: torch.Tensor):
        self.rows = rows

    def is_completed(self) -> bool:
        return True

    def wait(self) -> torch.Tensor:
        return self.rows


def inner_gradient(
    exchange: HaloExchange,
    grad_halo: torch.Tensor,
    own: Callable[[], torch.Tensor],
    post: Callable[[torch.Tensor], PendingHalo | Arrived],
    plan: HaloPlan | None = None,
) -> torch.Tensor:
    """The backward step every halo aggregation shares: ``post`` the halo rows' gradients to
    their owners, compute the inner rows' own gradient (``own()``) while they travel, then add
    what the peers return for the rows this rank sent them (in ``plan``'s send order)."""
    pending = post(grad_halo.contiguous())
    return exchange.add_returned(own(), pending.wait(), plan)


class _IntoBuffer(torch.autograd.Function):
    """[h_inner; halo] as ``full``, whose rows from ``num_inner`` on already hold ``halo``: what torch.cat gives,
    gradients included (each part's own slice, so they add up with the other uses of h_inner as after a cat)."""

    @staticmethod
    def forward(ctx, h_inner, halo, full: torch.Tensor):
        n = h_inner.shape[0]
        if halo.data_ptr() != full[n:].data_ptr():  # not received in place (no halo rows, or a copy on the way)
            full[n:].copy_(halo)
        full[:n].copy_(h_inner)
        ctx.num_inner = n
        return (
            full.detach()
        )  # an alias without the history of the buffer's earlier uses (it shares their version counter)

    @staticmethod
    def backward(ctx, grad_full):
        return grad_full[: ctx.num_inner], grad_full[ctx.num_inner :], None


class _HaloFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, exchange: HaloExchange, layer: int, traffic: Traffic, plan: HaloPlan | None, out):
        ctx.exchange, ctx.layer, ctx.traffic, ctx.plan, ctx.num_inner = exchange, layer, traffic, plan, h_inner.shape[0]
        rows = exchange.start(h_inner, layer, Direction.FORWARD, traffic, plan, out).wait()
        return rows if out is None else rows.detach()  # an alias of out, without the history of its earlier uses

    @staticmethod
    def backward(ctx, grad_halo):
        return (
            gradients_to_owners(ctx.exchange, grad_halo, ctx.layer, ctx.traffic, ctx.num_inner, ctx.plan),
            None,
            None,
            None,
            None,
            None,
        )


def gradients_to_owners(
    exchange: HaloExchange,
    grad_halo: torch.Tensor,
    layer: int,
    traffic: Traffic,
    num_inner: int,
    plan: HaloPlan | None = None,
) -> torch.Tensor:
    """The gradient of this rank's inner rows from the halo rows' gradients ``grad_halo``: each goes
    back to its owner, and what the peers return for the rows this rank sent them is added up."""
    return inner_gradient(
        exchange,
        grad_halo,
        lambda: grad_halo.new_zeros((num_inner,) + tuple(grad_halo.shape[1:])),
        lambda g: exchange.start(g, layer, Direction.BACKWARD, traffic, plan),
        plan,
    )


def _ranks_within(counts: torch.Tensor) -> torch.Tensor:
    """0..c-1 for every entry c of ``counts``, concatenated."""
    total = int(counts.sum())
    starts = torch.cumsum(counts, 0) - counts
    return torch.arange(total, device=counts.device) - torch.repeat_interleave(starts, counts)


def _block_sums(values: torch.Tensor, counts: list[int]) -> list[int]:
    """The sums of ``values`` over consecutive blocks of ``counts`` entries."""
    return [int(b.sum()) for b in torch.split(values, [int(c) for c in counts])]
