"""The parameter-gradient message: summed over ranks exactly, or compressed, always through ``Communicator``.

A gradient sync (``trainer.grad_sync.mode``) replaces every parameter's ``.grad`` (this rank's summand,
its loss already divided by the global count) with the sum over ranks, identical on every rank:

- ``allreduce``: one fp32 all-reduce of all gradients, concatenated (exact; gnnq's default).
- ``fp16`` / ``bf16``: the same all-reduce on a half-precision copy, summed in that precision.
- ``powersgd``: rank-r PowerSGD (Vogels et al., NeurIPS 2019, as torch's ``powerSGD_hook`` runs it: P = M Q and
  Q = M^T P all-reduced, P orthogonalized between them, Q warm-started, error feedback; tensors that would not
  shrink at least ``min_compression_rate`` times, and every vector, go as one fp32 all-reduce).
- ``codec``: gnnq's stochastic row codec (``gnnq.comm.kernels.torch_codec``) at ``bits`` bits on rows of
  ``CODEC_ROW`` gradient values; quantized values cannot be summed on the wire, so each rank's encoded
  gradient goes to every other rank (an all-to-all) and every rank sums the decoded gradients in rank order.

Bytes are counted by the communicator under ``GRAD_SYNC`` as for every other message: an all-reduce counts
its payload once per rank, the all-to-all what leaves the rank. ``analytic_bytes`` gives the same count from
the shapes alone (the tests hold the two equal). Why not DDP and its comm hooks: docs/methods.md, "Gradient sync".
"""

from __future__ import annotations

import torch

from gnnq.comm.accounting import GRAD_SYNC
from gnnq.comm.codec import stream_seed
from gnnq.comm.communicator import Communicator
from gnnq.comm.kernels import torch_codec
from gnnq.comm.kernels.philox import RowStreams
from gnnq.errors import GnnqError

MODES = ("allreduce", "fp16", "bf16", "powersgd", "codec")
CODEC_ROW = 256  # gradient values per codec row (each row: its own zero point and step)
CODEC_PARAMS = torch.float16  # the codec rows' parameter dtype (4 bytes per row)
HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _grads(params: list[torch.Tensor]) -> list[torch.Tensor]:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.zeros(0)


def _scatter(params: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Set each parameter's ``.grad`` to its slice of ``flat``."""
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()


class GradientSync:
    """One way of summing gradients over ranks; ``sync`` is collective (every rank, same order)."""

    mode = "allreduce"
    has_state = False  # whether it carries state across epochs (a checkpoint then holds ``state_dict``)

    def __init__(self, comm: Communicator):
        self.comm = comm

    def sync(self, params: list[torch.Tensor], epoch: int) -> None:
        if self.comm.world_size == 1:
            return
        self._sync(params, epoch)

    def _sync(self, params: list[torch.Tensor], epoch: int) -> None:
        """Today's exact sum: one fp32 all-reduce of all gradients, concatenated."""
        flat = _flat(_grads(params))
        self.comm.all_reduce(flat, category=GRAD_SYNC)
        _scatter(params, flat)

    def analytic_bytes(self, params: list[torch.Tensor], epoch: int) -> int:
        """The bytes one rank's ``sync`` counts for these parameters (world size > 1)."""
        return 4 * sum(p.numel() for p in params)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def describe(self) -> dict:
        return {"mode": self.mode}


class HalfPrecisionSync(GradientSync):
    """The all-reduce on a half-precision copy (torch's ``fp16_compress_hook`` / ``bf16_compress_hook``, summed)."""

    def __init__(self, comm: Communicator, mode: str):
        super().__init__(comm)
        self.mode, self.dtype = mode, HALF[mode]

    def _sync(self, params: list[torch.Tensor], epoch: int) -> None:
        flat = _flat(_grads(params))
        ws = self.comm.world_size  # divided before the sum as torch's hook does (no overflow), multiplied after
        half = self.comm.all_reduce(flat.to(self.dtype).div_(ws), category=GRAD_SYNC)
        _scatter(params, half.to(flat.dtype).mul_(ws))

    def analytic_bytes(self, params: list[torch.Tensor], epoch: int) -> int:
        return torch.finfo(self.dtype).bits // 8 * sum(p.numel() for p in params)


class PowerSGDSync(GradientSync):
    """Rank-``rank`` PowerSGD with error feedback and warm-started Q; exact before ``start_epoch``."""

    mode = "powersgd"
    has_state = True

    def __init__(
        self,
        comm: Communicator,
        rank: int,
        seed: int,
        error_feedback: bool = True,
        warm_start: bool = True,
        start_epoch: int = 1,
        min_compression_rate: float = 2.0,
    ):
        super().__init__(comm)
        self.rank, self.seed = rank, seed
        self.error_feedback, self.warm_start = error_feedback, warm_start
        self.start_epoch, self.min_compression_rate = start_epoch, min_compression_rate
        self.q: dict[int, torch.Tensor] = {}  # per compressed parameter (its index): the last Q
        self.error: dict[int, torch.Tensor] = {}  # per compressed parameter: this rank's error feedback

    def _matrix(self, p: torch.Tensor) -> tuple[int, int] | None:
        """(n, m) of ``p`` seen as a matrix when compressing it saves enough, else None."""
        if p.dim() < 2:
            return None
        n, m = p.shape[0], p.numel() // p.shape[0]
        r = min(self.rank, n, m)
        return (n, m) if n * m > self.min_compression_rate * (n + m) * r else None  # torch's _should_compress

    def _split(self, params):
        shapes = [self._matrix(p) for p in params]
        compressed = [i for i, s in enumerate(shapes) if s is not None]
        plain = [i for i, s in enumerate(shapes) if s is None]
        return shapes, compressed, plain

    def analytic_bytes(self, params: list[torch.Tensor], epoch: int) -> int:
        if epoch < self.start_epoch:
            return super().analytic_bytes(params, epoch)
        shapes, compressed, plain = self._split(params)
        low_rank = sum((shapes[i][0] + shapes[i][1]) * min(self.rank, *shapes[i]) for i in compressed)
        return 4 * (low_rank + sum(params[i].numel() for i in plain))

    def _sync(self, params: list[torch.Tensor], epoch: int) -> None:
        if epoch < self.start_epoch:
            return super()._sync(params, epoch)
        grads = _grads(params)
        shapes, compressed, plain = self._split(params)
        if plain:
            flat = self.comm.all_reduce(_flat([grads[i] for i in plain]), category=GRAD_SYNC)
            offset = 0
            for i in plain:
                params[i].grad = flat[offset : offset + grads[i].numel()].view_as(params[i])
                offset += grads[i].numel()
        if not compressed:
            return
        ms = []
        for i in compressed:
            m = grads[i].reshape(shapes[i]).clone()
            if self.error_feedback and i in self.error:
                m += self.error[i]
            ms.append(m)
        qs = [self._q(i, shapes[i]) for i in compressed]
        p_flat = self.comm.all_reduce(_flat([m @ q for m, q in zip(ms, qs)]), category=GRAD_SYNC)
        ps, offset = [], 0
        for m, q in zip(ms, qs):
            p = p_flat[offset : offset + m.shape[0] * q.shape[1]].view(m.shape[0], q.shape[1])
            ps.append(torch.linalg.qr(p, mode="reduced").Q)  # the same P on every rank: the same basis
            offset += p.numel()
        q_flat = self.comm.all_reduce(_flat([m.t() @ p for m, p in zip(ms, ps)]), category=GRAD_SYNC)
        offset = 0
        for i, m, p, q in zip(compressed, ms, ps, qs):
            q_sum = q_flat[offset : offset + q.numel()].view_as(q)
            offset += q.numel()
            approx = p @ q_sum.t()  # of the sum over ranks
            if self.error_feedback:  # the ranks' errors add up to the sum's error
                self.error[i] = m - approx / self.comm.world_size
            if self.warm_start:
                self.q[i] = q_sum.clone()
            params[i].grad = approx.reshape(params[i].shape).contiguous()

    def _q(self, index: int, shape: tuple[int, int]) -> torch.Tensor:
        """Q for one matrix: the previous one (warm start), else the same random orthonormal one on every rank."""
        if self.warm_start and index in self.q:
            return self.q[index]
        gen = torch.Generator().manual_seed(stream_seed(self.seed, "powersgd", index))
        q = torch.randn(shape[1], min(self.rank, *shape), generator=gen)
        return torch.linalg.qr(q, mode="reduced").Q

    def state_dict(self) -> dict:
        return {"q": dict(self.q), "error": dict(self.error)}

    def load_state_dict(self, state: dict) -> None:
        self.q, self.error = dict(state["q"]), dict(state["error"])

    def describe(self) -> dict:
        return {
            "mode": self.mode,
            "rank": self.rank,
            "error_feedback": self.error_feedback,
            "warm_start": self.warm_start,
            "start_epoch": self.start_epoch,
            "min_compression_rate": self.min_compression_rate,
        }


class NonFiniteGradientError(GnnqError):
    """A gradient to be quantized holds NaN or inf."""


class CodecSync(GradientSync):
    """gnnq's stochastic row codec at ``bits`` bits: encoded gradients to every rank, decoded sums in rank order."""

    mode = "codec"

    def __init__(self, comm: Communicator, bits: int, seed: int):
        super().__init__(comm)
        self.bits, self.seed = bits, seed

    def _rows(self, params) -> int:
        return -(-sum(p.numel() for p in params) // CODEC_ROW)

    def analytic_bytes(self, params: list[torch.Tensor], epoch: int) -> int:
        row = torch_codec.row_bytes(CODEC_ROW, self.bits, CODEC_PARAMS)
        return (self.comm.world_size - 1) * self._rows(params) * row

    def _sync(self, params: list[torch.Tensor], epoch: int) -> None:
        flat = _flat(_grads(params))
        rows, ws = self._rows(params), self.comm.world_size
        x = torch.nn.functional.pad(flat, (0, rows * CODEC_ROW - flat.numel())).view(rows, CODEC_ROW)
        streams = RowStreams.of_blocks([stream_seed(self.seed, epoch, "grad", self.comm.rank)], [rows], x.device)
        wire, finite = torch_codec.quantize_rows(
            x, torch.arange(rows, device=x.device), streams, self.bits, CODEC_PARAMS
        )
        if not finite:
            raise NonFiniteGradientError(
                f"non-finite values (NaN/inf) in the parameter gradients at epoch {epoch}; "
                "trainer.grad_sync.mode=codec cannot quantize them"
            )
        recv = self.comm.all_to_all(
            wire.expand(ws, *wire.shape).reshape(ws * rows, -1),
            [rows] * ws,
            [rows] * ws,
            category=GRAD_SYNC,
            layer=-1,
            direction="all",
        )
        decoded = torch_codec.unpack_dequantize(recv, CODEC_ROW, self.bits, CODEC_PARAMS).view(ws, -1)
        total = decoded[0].clone()
        for q in range(1, ws):  # rank order: the same sum on every rank
            total += decoded[q]
        _scatter(params, total[: flat.numel()])

    def describe(self) -> dict:
        return {"mode": self.mode, "bits": self.bits, "row": CODEC_ROW}


def make_gradient_sync(gcfg, comm: Communicator, seed: int) -> GradientSync:
    """The gradient sync ``trainer.grad_sync`` names (None or absent: the exact all-reduce)."""
    mode = gcfg.mode if gcfg is not None else "allreduce"
    if mode == "allreduce":
        return GradientSync(comm)
    if mode in HALF:
        return HalfPrecisionSync(comm, mode)
    if mode == "powersgd":
        return PowerSGDSync(
            comm,
            int(gcfg.rank),
            seed,
            bool(gcfg.error_feedback),
            bool(gcfg.warm_start),
            int(gcfg.start_epoch),
            float(gcfg.min_compression_rate),
        )
    if mode == "codec":
        return CodecSync(comm, int(gcfg.bits), seed)
    raise ValueError(f"trainer.grad_sync.mode={mode!r} is not allowed; allowed: {', '.join(MODES)}")
