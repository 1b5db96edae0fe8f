"""Count-based metrics: equal to direct computations, to OGB's Evaluator and sklearn, and additive over ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gnnq.data.loaders.ogb import ogb_evaluator_accuracy
from gnnq.train.metrics import SPLITS, loss_sum, metrics_from_counts, split_counts

N, C, L = 600, 7, 9  # nodes, classes (single-label), labels (multi-label)


def random_masks(n: int, seed: int) -> list[torch.Tensor]:
    """Disjoint train / val / test masks of uneven sizes that leave some nodes in no split."""
    g = torch.Generator().manual_seed(seed)
    r = torch.rand(n, generator=g)
    return [r < 0.5, (r >= 0.5) & (r < 0.7), (r >= 0.7) & (r < 0.95)]


def single_label(seed: int = 0, n: int = N):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, C, generator=g)
    y = torch.randint(0, C, (n,), generator=g)
    # make the predictions better than chance so accuracy is far from both 0 and 1
    good = torch.rand(n, generator=g) < 0.5
    logits[good, y[good]] += 5.0
    return logits, y


def multi_label(seed: int = 0, n: int = N):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, L, generator=g) < 0.3).float()
    logits = torch.randn(n, L, generator=g) + 1.5 * (2 * y - 1)  # informative, not perfect
    return logits, y


def hand_micro_f1(pred: np.ndarray, true: np.ndarray) -> float:
    tp = int(np.logical_and(pred, true).sum())
    fp = int(np.logical_and(pred, ~true).sum())
    fn = int(np.logical_and(~pred, true).sum())
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return 2 * precision * recall / (precision + recall)


# --- accuracy ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accuracy_equals_direct_and_ogb_evaluator(seed):
    logits, y = single_label(seed)
    masks = random_masks(N, seed)
    counts = split_counts(logits, y, masks, multilabel=False)
    assert counts.dtype == torch.float64 and counts.shape == (9,)
    result = metrics_from_counts(counts, "accuracy")
    assert set(result) == set(SPLITS)
    pred = logits.argmax(1)
    for split, mask in zip(SPLITS, masks):
        direct = (pred[mask] == y[mask]).double().mean().item()
        assert result[split] == pytest.approx(direct, abs=1e-12)
        official = ogb_evaluator_accuracy("ogbn-arxiv", y[mask].numpy(), pred[mask].numpy())
        assert result[split] == pytest.approx(official, abs=1e-12)
        assert 0.2 < result[split] < 0.9  # a real, non-degenerate value
    # the counts themselves: (correct, total, 0) per split
    for i, mask in enumerate(masks):
        assert counts[3 * i + 1].item() == mask.sum().item()
        assert counts[3 * i + 2].item() == 0


def test_accuracy_extremes():
    y = torch.arange(20) % 4
    perfect = F.one_hot(y, 4).float()
    wrong = F.one_hot((y + 1) % 4, 4).float()
    masks = [torch.ones(20, dtype=torch.bool)] * 3
    assert metrics_from_counts(split_counts(perfect, y, masks, False), "accuracy") == {
        "train": 1.0,
        "val": 1.0,
        "test": 1.0,
    }
    assert metrics_from_counts(split_counts(wrong, y, masks, False), "accuracy") == {
        "train": 0.0,
        "val": 0.0,
        "test": 0.0,
    }


@pytest.mark.parametrize("multilabel", [False, True])
def test_empty_split_is_none_not_an_error(multilabel):
    logits, y = multi_label() if multilabel else single_label()
    empty = torch.zeros(N, dtype=torch.bool)
    masks = [torch.ones(N, dtype=torch.bool), empty, empty]
    result = metrics_from_counts(split_counts(logits, y, masks, multilabel), "micro_f1" if multilabel else "accuracy")
    assert result["train"] is not None and 0 < result["train"] < 1
    assert result["val"] is None and result["test"] is None


# --- micro-F1 ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_micro_f1_equals_hand_computation(seed):
    logits, y = multi_label(seed)
    masks = random_masks(N, seed)
    counts = split_counts(logits, y, masks, multilabel=True)
    result = metrics_from_counts(counts, "micro_f1")
    for i, (split, mask) in enumerate(zip(SPLITS, masks)):
        pred, true = (logits[mask] > 0).numpy(), (y[mask] > 0.5).numpy()
        expected = hand_micro_f1(pred, true)
        assert result[split] == pytest.approx(expected, abs=1e-12)
        assert 0.3 < result[split] < 0.99
        tp, fp, fn = counts[3 * i : 3 * i + 3].tolist()
        assert tp + fn == true.sum() and tp + fp == pred.sum()


@pytest.mark.parametrize("seed", [0, 1])
def test_micro_f1_equals_sklearn(seed):
    metrics = pytest.importorskip("sklearn.metrics")
    logits, y = multi_label(seed)
    masks = random_masks(N, seed)
    result = metrics_from_counts(split_counts(logits, y, masks, multilabel=True), "micro_f1")
    for split, mask in zip(SPLITS, masks):
        expected = metrics.f1_score(
            y[mask].numpy().astype(int), (logits[mask] > 0).numpy().astype(int), average="micro"
        )
        assert result[split] == pytest.approx(expected, abs=1e-12)


def test_micro_f1_is_not_accuracy():
    # Many true negatives inflate element-wise accuracy but not micro-F1.
    y = torch.zeros(10, L)
    y[:, 0] = 1.0
    logits = torch.full((10, L), -1.0)
    logits[:5, 0] = 1.0  # half the positives found, no false positives
    masks = [torch.ones(10, dtype=torch.bool)] * 3
    result = metrics_from_counts(split_counts(logits, y, masks, True), "micro_f1")
    assert result["train"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # precision 1, recall 0.5


# --- summing counts over ranks ------------------------------------------------------------


@pytest.mark.parametrize("multilabel", [False, True])
@pytest.mark.parametrize("nranks", [2, 3, 5])
def test_counts_summed_over_ranks_equal_the_whole_batch(multilabel, nranks):
    logits, y = multi_label(nranks) if multilabel else single_label(nranks)
    masks = random_masks(N, nranks)
    metric = "micro_f1" if multilabel else "accuracy"
    whole_counts = split_counts(logits, y, masks, multilabel)
    whole = metrics_from_counts(whole_counts, metric)
    # uneven contiguous chunks after a shuffle, as ranks of different sizes would hold
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(nranks))
    cuts = sorted(torch.randperm(N - 1, generator=torch.Generator().manual_seed(7))[: nranks - 1].add(1).tolist())
    chunks = torch.tensor_split(perm, cuts)
    assert len(chunks) == nranks
    summed = sum(split_counts(logits[c], y[c], [m[c] for m in masks], multilabel) for c in chunks)
    assert torch.equal(summed, whole_counts)
    assert metrics_from_counts(summed, metric) == whole
    # averaging per-rank metrics is NOT the same thing (why counts, not metrics, are reduced)
    per_rank = [
        metrics_from_counts(split_counts(logits[c], y[c], [m[c] for m in masks], multilabel), metric)["train"]
        for c in chunks
    ]
    assert any(abs(v - whole["train"]) > 1e-9 for v in per_rank)


def test_rank_with_an_empty_split_contributes_zeros():
    logits, y = single_label()
    masks = random_masks(N, 0)
    none = [torch.zeros(N, dtype=torch.bool)] * 3
    assert torch.equal(split_counts(logits, y, none, False), torch.zeros(9, dtype=torch.float64))
    summed = split_counts(logits, y, masks, False) + split_counts(logits, y, none, False)
    assert metrics_from_counts(summed, "accuracy") == metrics_from_counts(
        split_counts(logits, y, masks, False), "accuracy"
    )


# --- loss ----------------------------------------------------------------------------------


def test_loss_sum_single_label_over_count_is_cross_entropy_mean():
    logits, y = single_label()
    logits.requires_grad_(True)
    mask = random_masks(N, 0)[0]
    total = loss_sum(logits[mask], y[mask], multilabel=False)
    assert total.dim() == 0
    count = int(mask.sum())
    torch.testing.assert_close(total / count, F.cross_entropy(logits[mask], y[mask]), rtol=1e-6, atol=0)
    # gradients agree too (the training loss is loss_sum / global count)
    (g1,) = torch.autograd.grad(total / count, logits)
    (g2,) = torch.autograd.grad(F.cross_entropy(logits[mask], y[mask]), logits)
    torch.testing.assert_close(g1, g2)


def test_loss_sum_multilabel_over_count_is_bce_mean():
    logits, y = multi_label()
    mask = random_masks(N, 1)[0]
    total = loss_sum(logits[mask], y[mask], multilabel=True)
    expected = F.binary_cross_entropy_with_logits(logits[mask], y[mask])  # mean over nodes and labels
    torch.testing.assert_close(total / int(mask.sum()), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("multilabel", [False, True])
def test_loss_sums_over_ranks_give_the_global_mean(multilabel):
    logits, y = multi_label(3) if multilabel else single_label(3)
    chunks = torch.tensor_split(torch.randperm(N, generator=torch.Generator().manual_seed(3)), [100, 350])
    summed = sum(loss_sum(logits[c], y[c], multilabel) for c in chunks)
    whole = (F.binary_cross_entropy_with_logits(logits, y) if multilabel else F.cross_entropy(logits, y)) * N
    torch.testing.assert_close(summed, whole, rtol=1e-5, atol=0)
