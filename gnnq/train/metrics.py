"""Classification metrics computed from counts, so ranks can sum them with one all-reduce."""

from __future__ import annotations

import torch
import torch.nn.functional as F

SPLITS = ("train", "val", "test")


def loss_sum(logits: torch.Tensor, y: torch.Tensor, multilabel: bool) -> torch.Tensor:
    """Summed (not averaged) loss; divide by the global count to get the full-graph mean."""
    if multilabel:
        return F.binary_cross_entropy_with_logits(logits, y, reduction="sum") / y.shape[1]
    return F.cross_entropy(logits, y, reduction="sum")


def split_counts(logits: torch.Tensor, y: torch.Tensor, masks: list[torch.Tensor], multilabel: bool) -> torch.Tensor:
    """Per split three counts: accuracy (correct, total, 0); micro-F1 (tp, fp, fn)."""
    out = []
    for mask in masks:
        if multilabel:
            pred, true = logits[mask] > 0, y[mask] > 0.5
            out += [(pred & true).sum(), (pred & ~true).sum(), (~pred & true).sum()]
        else:
            out += [
                (logits[mask].argmax(1) == y[mask]).sum(),
                mask.sum(),
                torch.zeros((), dtype=torch.int64, device=logits.device),
            ]
    return torch.stack(out).to(torch.float64)


def metrics_from_counts(counts: torch.Tensor, metric: str) -> dict[str, float | None]:
    result = {}
    for i, split in enumerate(SPLITS):
        a, b, c = (float(v) for v in counts[3 * i : 3 * i + 3])
        if metric == "micro_f1":
            denom = 2 * a + b + c
            result[split] = 2 * a / denom if denom else None
        else:
            result[split] = a / b if b else None
    return result
