"""gnnq-bench: real small runs side by side, interleaved and repeated; its table from their records.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_bench_harness.py`.
"""

from __future__ import annotations

import pytest

from gnnq.bench.bench_report import pairs_text, table_rows
from gnnq.bench.compare import compare, speedup_bounds
from gnnq.bench.harness import build_points, parse_args, run_order
from gnnq.errors import ConfigError


def test_speedup_bounds_by_hand():
    """T = 10 s: 6 s halo (M), 1 s all-reduce, 3 s compute; the method sends a quarter of the bytes, codec 0.5 s."""
    base = {0: {"epoch_time_s": 10.0, "comm_time_s": 7.0, "summary": {"halo_comm_time_s": 6.0}}}
    mine = {0: {"epoch_time_s": 6.0, "comm_time_s": 2.0, "summary": {"codec_time_s": 0.5}}}
    no_overlap, overlap = speedup_bounds(base, mine, 0.25)
    assert no_overlap == pytest.approx(10.0 / (3.0 + 1.0 + 0.5 + 1.5))  # the all-reduce is not shrunk by r
    assert overlap == pytest.approx(10.0 / 4.5)  # max(compute + all-reduce + codec, r·M)
    assert speedup_bounds(base, mine, None) == (None, None) and speedup_bounds({}, mine, 0.25) == (None, None)


def test_overrides_may_follow_the_options():
    args = parse_args(
        ["adaqp_emulated", "experiment=adaqp_vanilla,adaqp", "--repeats", "1", "trainer.epochs=20", "--out", "x"]
    )
    assert args.overrides == ["experiment=adaqp_vanilla,adaqp", "trainer.epochs=20"] and args.repeats == 1


def test_run_order_interleaves_and_rotates():
    order = run_order(3, 3)
    assert order == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 0), (2, 2), (2, 0), (2, 1)]
    assert all(sorted(i for r, i in order if r == rep) == [0, 1, 2] for rep in range(3))


def _runs(tmp_path, name, epoch_s, comm_bytes, test):
    """Two repeats of one method, as gnnq-bench reads them from run records (no metrics: no time to target)."""
    return {
        r: {
            "status": "ok",
            "run_dir": str(tmp_path / f"{name}{r}"),
            "epoch_time_s": epoch_s[r],
            "comm_time_s": epoch_s[r] / 2,
            "comm_bytes_per_epoch": comm_bytes,
            "best_val": test,
            "test": test,
        }
        for r in range(2)
    }


def test_a_paired_method_is_compared_against_its_own_baseline(tmp_path):
    """--pair adaqp_published=adaqp_vanilla_published: the published AdaQP's speedup, bytes and Δ test are against
    the published Vanilla; gnnq's AdaQP and the published Vanilla itself stay against --baseline."""
    raw = [
        [f"experiment={m}", "cluster.hosts=2"]
        for m in ("adaqp_vanilla_published", "adaqp_published", "adaqp_vanilla", "adaqp")
    ]
    points, pairs = build_points(raw, "experiment=adaqp_vanilla", ["adaqp_published=adaqp_vanilla_published"])
    assert pairs == {"adaqp_published": "adaqp_vanilla_published"}
    for p, (epochs, sent, test) in zip(
        points,
        [((6.0, 5.0), 400, 0.90), ((2.0, 2.5), 100, 0.89), ((4.0, 4.0), 200, 0.91), ((2.0, 2.0), 50, 0.93)],
        strict=True,
    ):
        p.runs = _runs(tmp_path, p.method, epochs, sent, test)
    rows = {r["method"]: r for r in compare(points, "adaqp_vanilla", None, 0.01, pairs)}
    published = rows["adaqp_published"]
    assert published["baseline"] == "adaqp_vanilla_published"
    assert (published["speedup_min"], published["speedup_max"]) == (2.0, 3.0)  # 5/2.5 and 6/2, paired by repeat
    assert published["bytes_vs_baseline"] == 0.25 and published["test_vs_baseline"] == pytest.approx(-0.01)
    assert rows["adaqp"]["baseline"] == "adaqp_vanilla" and rows["adaqp"]["speedup"] == 2.0
    assert rows["adaqp_vanilla_published"]["baseline"] == "adaqp_vanilla"
    assert rows["adaqp_vanilla_published"]["bytes_vs_baseline"] == 2.0
    # the README's table says which reference each row has, and the text lists the pairs
    headers, cells = table_rows(list(rows.values()))
    against = headers.index("against")
    assert [c[against] for c in cells] == ["adaqp_vanilla", "adaqp_vanilla_published", "adaqp_vanilla", "adaqp_vanilla"]
    assert "`adaqp_published` against `adaqp_vanilla_published`" in pairs_text(pairs)
    # without --pair, every method is against --baseline, and the table has no such column
    unpaired = compare(points, "adaqp_vanilla", None, 0.01)
    assert all(r["baseline"] == "adaqp_vanilla" for r in unpaired) and unpaired[1]["bytes_vs_baseline"] == 0.5
    assert "against" not in table_rows(unpaired)[0] and pairs_text({}) == ""


@pytest.mark.parametrize(
    "pair, message",
    [
        ("adaqp_published", r"--pair 'adaqp_published': give it as METHOD=BASELINE, two values of experiment"),
        ("adaqp_published=sync", r"--pair adaqp_published=sync: 'sync' is not a value of experiment here"),
        (
            "adaqp_q=adaqp",
            r"--pair adaqp_q=adaqp: 'adaqp_q' is not a value of experiment here \(adaqp_published, adaqp\)",
        ),
    ],
)
def test_a_bad_pair_is_named(pair, message):
    raw = [["experiment=adaqp_published"], ["experiment=adaqp"]]
    with pytest.raises(ConfigError, match=message):
        build_points(raw, "experiment=adaqp", [pair])


def test_a_pair_names_one_other_baseline():
    raw = [["experiment=adaqp_published"], ["experiment=adaqp"], ["experiment=adaqp_vanilla"]]
    with pytest.raises(ConfigError, match=r"--pair adaqp=adaqp: a method against itself"):
        build_points(raw, "experiment=adaqp_vanilla", ["adaqp=adaqp"])
    with pytest.raises(ConfigError, match=r"--pair adaqp=adaqp_published: adaqp is already paired with adaqp_vanilla"):
        build_points(raw, "experiment=adaqp_vanilla", ["adaqp=adaqp_vanilla", "adaqp=adaqp_published"])
    _, pairs = build_points(raw, "experiment=adaqp_vanilla", ["adaqp=adaqp_published", "adaqp=adaqp_published"])
    assert pairs == {"adaqp": "adaqp_published"}  # the same pair twice is one pair
