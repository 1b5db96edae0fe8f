"""A rank's timeline of one training epoch: messages posted and waited for, collectives, codec work
(``trainer.trace=true``; the format: docs/runs.md#traces).

The communicator (the one place messages cross ranks) reports every message here while an epoch is
traced; events are kept in memory and handed to ``sink`` once per epoch, after the epoch's timer
stopped. Times are ``time.perf_counter()`` seconds from the epoch's start on this rank (on CUDA: the
host's clock, not the streams'). The gaps between communication events are written as compute,
labelled by the next event's layer and direction.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gnnq.comm.accounting import GRAD_SYNC

ENCODE, DECODE = "encode", "decode"


class TraceRecorder:
    """Buffers the events of the epoch in progress; ``sink(line)`` gets each epoch's line (a dict)."""

    def __init__(self, rank: int, world_size: int, sink: Callable[[dict], None]):
        self.rank, self.world_size, self.sink = rank, world_size, sink
        self.active = False
        self.epoch = 0
        self.origin = 0.0
        self.events: list[dict] = []
        self._seq = 0
        self._encode: tuple | None = None  # (key, start, seconds) of the codec work the next post sends

    def begin_epoch(self, epoch: int, origin: float) -> None:
        """Trace from now on as ``epoch``, whose timer started at ``origin`` (perf_counter)."""
        self.epoch, self.origin, self.events, self._seq, self._encode = int(epoch), origin, [], 0, None
        self.active = True

    def end_epoch(self, epoch_s: float) -> dict:
        """Stop tracing; the epoch's line (compute gaps filled in) goes to the sink and is returned."""
        self.active = False
        events = with_compute(self.events, epoch_s)
        line = {"epoch": self.epoch, "rank": self.rank, "epoch_s": epoch_s, "events": events}
        self.events = []
        self.sink(line)
        return line

    def _t(self, at: float) -> float:
        return at - self.origin

    def codec(self, key: tuple, phase: str, start: float, end: float) -> None:
        """Encode work goes with the next post of ``key``; decode work with the last wait (of ``key``)."""
        if phase == ENCODE:
            self._encode = (key, start, end - start)
            return
        for event in reversed(self.events):
            if event["op"] == "wait" and event.get("key") == key:
                event["t1"] = max(event["t1"], self._t(end))
                event["decode_s"] += end - start
                return

    def post(self, key: tuple, start: float, end: float, send_bytes: list[int], recv_bytes: list[int]) -> str:
        """A message posted from ``start`` to ``end`` (encoding, when it was just encoded, included); its id."""
        msg = f"{self.epoch}:{self._seq}"
        self._seq += 1
        encode_s = 0.0
        if self._encode is not None and self._encode[0] == key:
            start, encode_s = min(start, self._encode[1]), self._encode[2]
        self._encode = None
        category, layer, direction = key
        self.events.append(
            {
                "op": "post",
                "t0": self._t(start),
                "t1": self._t(end),
                "msg": msg,
                "category": category,
                "layer": layer,
                "direction": direction,
                "send_bytes": send_bytes,
                "recv_bytes": recv_bytes,
                "encode_s": encode_s,
                "key": key,
            }
        )
        return msg

    def wait(self, key: tuple, msg: str | None, start: float, end: float) -> None:
        """The rank blocked from ``start`` to ``end`` for message ``msg`` (None: posted while not tracing)."""
        category, layer, direction = key
        self.events.append(
            {
                "op": "wait",
                "t0": self._t(start),
                "t1": self._t(end),
                "msg": msg,
                "decode_s": 0.0,
                "category": category,
                "layer": layer,
                "direction": direction,
                "key": key,
            }
        )

    def collective(
        self,
        category: str,
        start: float,
        end: float,
        nbytes: int,
        kind: str = "all_reduce",
        layer: int = -1,
        direction: str = "all",
        group: list[int] | None = None,
    ) -> None:
        """A blocking collective (written as op "allreduce"; ``kind`` says which). One on a sub-group (``group``:
        its global ranks) is written with them, its layer and direction, and ``bytes`` as this rank counted them
        (what it puts on the wire: gnnq.comm.Communicator)."""
        event = {
            "op": "allreduce",
            "t0": self._t(start),
            "t1": self._t(end),
            "bytes": int(nbytes),
            "category": category,
        }
        if kind != "all_reduce":
            event["kind"] = kind
        if group is not None:
            event |= {"group": list(group), "layer": layer, "direction": direction}
        self.events.append(event)

    def now(self) -> float:
        return time.perf_counter()


def with_compute(events: list[dict], epoch_s: float) -> list[dict]:
    """``events`` in time order, each gap between them (and before the first, after the last) as a compute event
    labelled by the next event's layer and direction; after the gradient all-reduce: the optimizer. Drops the
    recorder's internal ``key``."""
    out, cursor, previous = [], 0.0, None
    for event in sorted(events, key=lambda e: e["t0"]):
        event.pop("key", None)
        t0 = max(event["t0"], cursor)
        if t0 > cursor:
            out.append(_compute(cursor, t0, event, previous))
        event["t0"], event["t1"] = t0, max(event["t1"], t0)
        out.append(event)
        cursor, previous = event["t1"], event
    end = max(epoch_s, cursor)
    if end > cursor:
        out.append(_compute(cursor, end, None, previous))
    return out


def _compute(t0: float, t1: float, following: dict | None, previous: dict | None) -> dict:
    layer = following.get("layer") if following is not None else None
    direction = following.get("direction") if following is not None else None
    if layer is not None and layer < 0:  # collectives are not of a layer
        layer, direction = None, None
    if direction not in ("fwd", "bwd"):
        direction = None
    after_grads = previous is not None and previous["op"] == "allreduce" and previous["category"] == GRAD_SYNC
    what = "optimizer" if after_grads else ("layer" if layer is not None else "other")
    return {"op": "compute", "t0": t0, "t1": t1, "layer": layer, "direction": direction, "what": what}
