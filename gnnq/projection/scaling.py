"""Timelines for more (or fewer) ranks than were traced: every new rank replays a recorded rank's timeline, scaled
to its own part.

New rank i replays recorded rank i mod W (W: ranks traced). Its part's sizes come from a real partition of the graph
(partstats) or from the extrapolation rule (extrapolate.py). The rules, stated in docs/projection.md:

- a layer's compute (kind ``layer``, layer l, direction d): a_d * E * w_l + b_d * N * w_l * w_(l+1), with E the
  part's local edges, N its inner nodes and w the layer's input and output widths (aggregation over the local edges
  at the input width, the dense transform per inner node); a_d, b_d >= 0 fitted by least squares over the recorded
  ranks and layers of each direction (fit_layer_model). Without a usable fit: proportional to
  E * w_l + N * w_l * w_(l+1) with equal weights.
- loss and the untagged rest: proportional to inner nodes; the optimizer: unchanged (same parameters).
- a message's bytes to each peer: the new part's rows for that peer times the recorded bytes per row of that message
  on the template rank (which carries its quantization and, for BNS-GCN, its sampling rate); forward messages follow
  ``rows_to``/``halo_rows_from``, gradients (direction bwd) the reverse. Encoding and decoding scale with the bytes.
- all-reduces: unchanged bytes (the gradient is the model's size), ring on the new cluster.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

import numpy as np

from gnnq.projection.timeline import AllReduce, Compute, EpochStart, Op, Post, Wait


@dataclass(frozen=True)
class LayerModel:
    """Layer compute seconds = a[d] * E * w_in + b[d] * N * w_in * w_out, per direction d."""

    a: dict
    b: dict
    fitted: bool

    def work(self, direction: str | None, edges: float, nodes: float, w_in: int, w_out: int) -> float:
        d = direction if direction in self.a else "all"
        return self.a[d] * edges * w_in + self.b[d] * nodes * w_in * w_out


def layer_seconds(timelines: list[list[Op]], n_epochs: int) -> dict:
    """(rank, layer, direction) -> median seconds per epoch of compute tagged with that layer."""
    out = {}
    for r, ops in enumerate(timelines):
        per_epoch: dict = {}
        e = -1
        for op in ops:
            if isinstance(op, EpochStart):
                e += 1
            elif isinstance(op, Compute) and op.kind == "layer" and op.layer is not None:
                key = (r, op.layer, op.direction)
                per_epoch.setdefault(key, [0.0] * n_epochs)[e] += op.seconds
        for key, vals in per_epoch.items():
            out[key] = statistics.median(vals)
    return out


def fit_layer_model(timelines: list[list[Op]], n_epochs: int, parts: list[dict], widths: list[int]) -> LayerModel:
    from scipy.optimize import nnls

    secs = layer_seconds(timelines, n_epochs)
    a, b, fitted = {}, {}, {}
    for d in sorted({k[2] for k in secs} | {"all"}, key=str):
        rows, ys = [], []
        for (r, layer, direction), s in secs.items():
            if (d != "all" and direction != d) or layer + 1 >= len(widths):
                continue
            p = parts[r]
            rows.append([p["local_edges"] * widths[layer], p["inner_nodes"] * widths[layer] * widths[layer + 1]])
            ys.append(s)
        coef = None
        if len(rows) >= 2:
            x = np.array(rows, dtype=float)
            scale = x.max(axis=0)
            if (scale > 0).all() and np.linalg.matrix_rank(x / scale) == 2:
                sol, _ = nnls(x / scale, np.array(ys))
                coef = sol / scale
                if not (coef > 0).any():
                    coef = None
        fitted[d] = coef is not None
        if coef is None:  # equal weights: E * w_in + N * w_in * w_out (only ratios of this are ever used)
            coef = np.array([1.0, 1.0])
        a[d], b[d] = float(coef[0]), float(coef[1])
    return LayerModel(a, b, all(fitted.values()))


def _rows(part: dict, direction: str | None) -> tuple[list[int], list[int]]:
    """(rows sent to each peer, rows received from each peer) of a message in ``direction``."""
    if direction == "bwd":
        return part["halo_rows_from"], part["rows_to"]
    return part["rows_to"], part["halo_rows_from"]


def scaled_timelines(
    timelines: list[list[Op]],
    recorded_parts: list[dict],
    new_parts: list[dict],
    widths: list[int],
    model: LayerModel,
) -> list[list[Op]]:
    """One timeline per new part, from the recorded rank i mod W scaled to part i."""
    w_old, w_new = len(timelines), len(new_parts)
    out = []
    for i in range(w_new):
        t = i % w_old
        old, new = recorded_parts[t], new_parts[i]
        out.append([_scale_op(op, old, new, widths, model, w_new) for op in _with_bytes_ratio(timelines[t], old, new)])
    return out


def _with_bytes_ratio(ops: list[Op], old: dict, new: dict):
    """Yields (op, send ratio, recv ratio): for encode/decode, the message's new over recorded bytes."""
    by_msg = {}
    for op in ops:
        if isinstance(op, Post):
            s_old, r_old = _rows(old, op.direction)
            s_new, r_new = _rows(new, op.direction)
            by_msg[op.msg] = (
                sum(s_new) / sum(s_old) if sum(s_old) else 1.0,
                sum(r_new) / sum(r_old) if sum(r_old) else 1.0,
            )
    for op in ops:
        yield op, by_msg.get(getattr(op, "msg", None), (1.0, 1.0))


def _scale_op(item, old: dict, new: dict, widths: list[int], model: LayerModel, w_new: int) -> Op:
    op, (send_ratio, recv_ratio) = item
    if isinstance(op, (EpochStart, Wait, AllReduce)):
        return op
    if isinstance(op, Post):
        return replace(
            op,
            send_bytes=_bytes(op.send_bytes, old, new, op.direction, 0, w_new),
            recv_bytes=_bytes(op.recv_bytes, old, new, op.direction, 1, w_new),
        )
    nodes = new["inner_nodes"] / old["inner_nodes"] if old["inner_nodes"] else 1.0
    if op.kind == "layer" and op.layer is not None and op.layer + 1 < len(widths):
        wi, wo = widths[op.layer], widths[op.layer + 1]
        before = model.work(op.direction, old["local_edges"], old["inner_nodes"], wi, wo)
        after = model.work(op.direction, new["local_edges"], new["inner_nodes"], wi, wo)
        ratio = after / before if before > 0 else nodes
    elif op.kind == "optimizer":
        ratio = 1.0
    elif op.kind == "encode":
        ratio = send_ratio
    elif op.kind == "decode":
        ratio = recv_ratio
    else:
        ratio = nodes
    return replace(op, seconds=op.seconds * ratio)


def _bytes(recorded: tuple[int, ...], old: dict, new: dict, direction: str | None, side: int, w_new: int):
    """New bytes per peer: the new part's rows per peer times the recorded bytes per row of this message."""
    rows_old, rows_new = _rows(old, direction)[side], _rows(new, direction)[side]
    total_rows = sum(rows_old)
    per_row = sum(recorded) / total_rows if total_rows else 0.0
    if not total_rows and sum(recorded):  # bytes without rows (not a halo message): spread evenly over the peers
        return tuple(int(round(sum(recorded) / max(1, w_new - 1))) if q != new["rank"] else 0 for q in range(w_new))
    return tuple(int(round(per_row * rows_new[q])) for q in range(w_new))


def compute_totals(timelines: list[list[Op]]) -> dict:
    """(kind, layer, direction) -> seconds per epoch (median over epochs, summed over ranks) of the compute ops."""
    per: dict = {}
    for ops in timelines:
        e = -1
        for op in ops:
            if isinstance(op, EpochStart):
                e += 1
            elif isinstance(op, Compute) and e >= 0:
                per.setdefault((op.kind, op.layer, op.direction), {}).setdefault(e, 0.0)
                per[(op.kind, op.layer, op.direction)][e] += op.seconds
    return {k: statistics.median(v.values()) for k, v in per.items()}


def with_compute_of(timelines: list[list[Op]], reference: list[list[Op]]) -> list[list[Op]]:
    """``timelines`` with each compute kind / layer / direction rescaled to what ``reference`` (another trace of the
    same method and ranks) spent on it; encoding and decoding stay (they follow the bytes)."""
    mine, ref = compute_totals(timelines), compute_totals(reference)
    ratio = {k: ref[k] / v for k, v in mine.items() if k in ref and v > 0 and k[0] not in ("encode", "decode")}
    return [
        [
            replace(op, seconds=op.seconds * ratio.get((op.kind, op.layer, op.direction), 1.0))
            if isinstance(op, Compute)
            else op
            for op in ops
        ]
        for ops in timelines
    ]
