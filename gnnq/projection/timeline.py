"""A traced rank's epochs as a sequence of operations the engines replay.

The communication events (post, wait, all-reduce) are the skeleton; every interval between them is compute, split by
the compute spans that cover it (``kind`` layer / loss / optimizer, the rest ``other``), so a span that encloses a post
is never counted twice. A post's own duration is compute (``encode``: encoding and handing the message over); a wait
becomes the dependency itself plus its ``decode`` compute: how long it blocked is what the engine works out.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE_KINDS = ("layer", "loss", "optimizer", "other", "encode", "decode")


@dataclass(frozen=True)
class Compute:
    seconds: float
    kind: str = "other"
    layer: int | None = None
    direction: str | None = None
    msg: str | None = None  # encode / decode: their message


@dataclass(frozen=True)
class Post:
    msg: str
    send_bytes: tuple[int, ...]
    recv_bytes: tuple[int, ...]
    category: str | None = None
    layer: int | None = None
    direction: str | None = None


@dataclass(frozen=True)
class Wait:
    msg: str


@dataclass(frozen=True)
class AllReduce:
    """A blocking collective. Over every rank (``group`` None): an all-reduce of ``bytes`` (the payload). Over a
    sub-group (``group``: its global ranks, e.g. a line of parallel=tensor3d's grid): ``kind`` all_reduce,
    all_gather or reduce_scatter, ``bytes`` what each member puts on the wire (as gnnq's exchange layer counts it)."""

    bytes: int
    category: str | None = None
    overhead_s: float = 0.0  # the collective's own cost beyond moving its bytes (reductions, protocol), calibrated
    group: tuple[int, ...] | None = None
    kind: str = "all_reduce"

    def ring_steps(self, members: int) -> int:
        """Latencies of the ring algorithm: 2 (g-1) for an all-reduce, g-1 for an all-gather or reduce-scatter."""
        return (2 if self.kind == "all_reduce" else 1) * (members - 1)


@dataclass(frozen=True)
class EpochStart:
    epoch: int


Op = Compute | Post | Wait | AllReduce | EpochStart


def rank_timeline(epochs: list[dict], allreduce_overheads: list[list[float]] | None = None) -> list[Op]:
    """Rank's ops for ``epochs`` (its epoch objects); ``allreduce_overheads[e][k]``: the k-th all-reduce's
    calibrated overhead in epoch e (None: 0)."""
    ops: list[Op] = []
    for i, ep in enumerate(epochs):
        ops.append(EpochStart(int(ep.get("epoch", i))))
        ops += epoch_ops(ep, allreduce_overheads[i] if allreduce_overheads else None)
    return ops


def epoch_ops(ep: dict, ar_overheads: list[float] | None = None) -> list[Op]:
    events = sorted(ep["events"], key=lambda e: (e["t0"], e["t1"]))
    spans = [e for e in events if e["op"] == "compute"]
    comm = [e for e in events if e["op"] != "compute"]
    ops: list[Op] = []
    cursor, k = 0.0, 0
    for ev in comm:
        t0 = max(ev["t0"], cursor)  # overlapping communication events: the later one starts where the first ended
        t1 = max(ev["t1"], t0)
        ops += _compute_between(cursor, t0, spans)
        if ev["op"] == "post":
            ops.append(Compute(t1 - t0, "encode", ev.get("layer"), ev.get("direction"), ev["msg"]))
            ops.append(
                Post(
                    ev["msg"],
                    tuple(int(b) for b in ev["send_bytes"]),
                    tuple(int(b) for b in ev["recv_bytes"]),
                    ev.get("category"),
                    ev.get("layer"),
                    ev.get("direction"),
                )
            )
        elif ev["op"] == "wait":
            ops.append(Wait(ev["msg"]))
            decode = min(float(ev.get("decode_s") or 0.0), t1 - t0)
            if decode > 0:
                ops.append(Compute(decode, "decode", msg=ev["msg"]))
        elif ev.get("group") is not None:  # a sub-group's collective: no calibrated overhead (world ones only)
            group = tuple(int(q) for q in ev["group"])
            ops.append(AllReduce(int(ev["bytes"]), ev.get("category"), 0.0, group, ev.get("kind", "all_reduce")))
        else:
            overhead = ar_overheads[k] if ar_overheads and k < len(ar_overheads) else 0.0
            ops.append(AllReduce(int(ev["bytes"]), ev.get("category"), overhead))
            k += 1
        cursor = t1
    ops += _compute_between(cursor, max(float(ep["epoch_s"]), cursor), spans)
    return ops


def _compute_between(a: float, b: float, spans: list[dict]) -> list[Compute]:
    """The compute in [a, b]: one op per covering span's part, the uncovered rest as ``other``."""
    if b <= a:
        return []
    out, covered = [], 0.0
    for s in spans:
        ov = min(b, s["t1"]) - max(a, s["t0"])
        if ov > 0:
            kind = s.get("what") if s.get("what") in COMPUTE_KINDS else "other"
            out.append(Compute(ov, kind, s.get("layer"), s.get("direction")))
            covered += ov
    if covered > b - a:  # nested or overlapping spans: shares of the interval, not more than it
        out = [Compute(c.seconds * (b - a) / covered, c.kind, c.layer, c.direction) for c in out]
        covered = b - a
    rest = (b - a) - covered
    if rest > 1e-12:
        out.append(Compute(rest, "other"))
    return out


def breakdown(ops: list[Op]) -> dict[str, float]:
    """Seconds of compute by kind in ``ops`` (what a timeline holds before any replay)."""
    out = dict.fromkeys(COMPUTE_KINDS, 0.0)
    for op in ops:
        if isinstance(op, Compute):
            out[op.kind] += op.seconds
    return out
