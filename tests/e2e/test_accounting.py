"""Every number a run reports, cross-checked against its source.

One short real ``gnnq`` run per way of training (torchrun, gloo, a METIS-partitioned synthetic
graph): sync, overlap, stale and sampling with fp32 messages, sync with 4-bit messages on 3 ranks,
AdaQP's adaptive widths, PipeQS's per-message widths and skips (3 ranks), Sylvie's widths by in-degree, and
pdADMM-G. For each:

- halo bytes of every training epoch equal the count made from the partition's send plans (read
  back from the parts cache) and the widths in force, exactly; the summary's per-epoch bytes and
  per-layer bytes agree with the rows;
- each epoch's communication and compute times fit inside its epoch time, and the summary's times
  are what its rows say (median epoch, overheads by kind, training time, throughput);
- the training curve that time to target reads adds epoch times and overheads, row by row;
- gnnq-report's configuration table holds the records' numbers.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from gnnq.comm.kernels.torch_codec import row_bytes
from gnnq.data.part_cache import load_part
from gnnq.parallel.sampling import sampled_positions
from gnnq.parallel.sylvie import segment_widths
from gnnq.report.curves import read_curve, time_to_target
from gnnq.track.overheads import OVERHEAD_KINDS
from tests.cli_helpers import gnnq_env, read_metrics, read_record, run_dirs, run_gnnq

LAYERS, HIDDEN, EPOCHS = 3, 16, 6
COMMON = [
    "logger=none",
    "dataset.num_nodes=600",
    f"model.layers={LAYERS}",
    f"model.hidden={HIDDEN}",
    f"trainer.epochs={EPOCHS}",
    "trainer.eval_every=2",
]
RATE = 0.3
RUNS = {
    "sync": [],
    "overlap": ["parallel=overlap"],
    "stale": ["parallel=stale"],
    "sampling": ["parallel=sampling", f"parallel.sampling_rate={RATE}"],
    "uniform4": ["quantizer=uniform", "quantizer.bits=4", "cluster.nproc=3"],
    "adaptive": ["parallel=overlap", "quantizer=adaptive", "quantizer.assign_cycle=2", "quantizer.time_model=fixed"],
    # parallel.inputs=every_epoch (AdaQP's layer-0 exchange): the layer-0 features go with every training step
    "sync_inputs": ["parallel.inputs=every_epoch"],
    "uniform4_inputs": ["quantizer=uniform", "quantizer.bits=4", "cluster.nproc=3", "parallel.inputs=every_epoch"],
    "admm": ["experiment=pdadmm_g", "model.layers=4", "parallel.warmup_iterations=2", "model.hops=2"],
    # the width of each message and whether it was skipped are in each row (``messages``): with a low threshold the
    # width steps up every epoch, to exact fp32 rows
    "pipeqs": ["experiment=pipeqs_published", "cluster.nproc=3", "parallel.threshold=0.0"],
    "sylvie": ["experiment=sylvie"],
}
FULL_GRAPH = [name for name in RUNS if name != "admm"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> (run dir, record, rows, data root); each run made on first use."""
    root = tmp_path_factory.mktemp("reported")
    made: dict[str, tuple] = {}

    def get(name: str):
        if name not in made:
            res = run_gnnq([*COMMON, *RUNS[name]], root / "runs" / name, root / "data", timeout=600)
            assert res.returncode == 0, res.stderr[-3000:]
            (run_dir,) = run_dirs(root / "runs" / name)
            made[name] = (run_dir, read_record(run_dir), read_metrics(run_dir), root / "data")
        return made[name]

    return get


def _parts(record: dict, data: Path) -> list:
    (entry,) = [p for p in data.rglob(record["partition"]["key"]) if p.is_dir()]
    return [load_part(entry, r) for r in range(record["world_size"])]


def _message_rows(parts: list, name: str, epoch: int, seed: int) -> int:
    """Rows of one hidden layer's forward message, all ranks (its backward returns as many)."""
    if name != "sampling":
        return sum(int(sum(p.send_counts)) for p in parts)
    return sum(
        len(sampled_positions(int(count), RATE, seed, epoch, owner, peer))
        for owner, p in enumerate(parts)
        for peer, count in enumerate(p.send_counts)
    )


def _expected_epoch_bytes(name: str, record: dict, row: dict, parts: list, widths: dict[int, int] | None) -> int:
    """Halo bytes of one training epoch from the send plans: forward rows out and their gradients back, per hidden
    layer; with parallel.inputs=every_epoch also the layer-0 features' forward message, in the forward codec."""
    messages = 2 * (LAYERS - 1)
    if name.endswith("_inputs"):
        features, rows = record["config"]["dataset"]["feature_dim"], _message_rows(parts, name, row["epoch"], 0)
        inputs = rows * (row_bytes(features, 4, torch.float16) if name.startswith("uniform4") else features * 4)
        return inputs + _expected_epoch_bytes(name.removesuffix("_inputs"), record, row, parts, widths)
    if name == "pipeqs":  # each message at its own width (0: skipped, -1: none), plus a decision byte per peer
        rows, world = _message_rows(parts, name, row["epoch"], 0), len(parts)
        per_row = {32: HIDDEN * 4, 0: 0, -1: 0}
        return sum(
            rows * per_row.get(bits, row_bytes(HIDDEN, bits, torch.float32)) + shared * world * (world - 1)
            for bits, shared in row["messages"].values()
        )
    if name == "sylvie":  # every sent row at its width by in-degree importance, at the epoch's base width
        sent = sum(
            int(row_bytes(HIDDEN, int(b), torch.float16))
            for p in parts
            for b in segment_widths(p.in_degree[p.send_idx], [int(c) for c in p.send_counts], row["base_bits"])
        )
        return messages * sent
    if name == "adaptive":  # the widths in force: the first cycle at 8 bits, then the last assignment's histogram
        if widths is None:
            return messages * _message_rows(parts, name, row["epoch"], 0) * row_bytes(HIDDEN, 8, torch.float16)
        return sum(n * row_bytes(HIDDEN, b, torch.float16) for b, n in widths.items())
    per_row = row_bytes(HIDDEN, 4, torch.float16) if name == "uniform4" else HIDDEN * 4
    return messages * _message_rows(parts, name, row["epoch"], record["config"]["trainer"]["seed"]) * per_row


@pytest.mark.parametrize("name", FULL_GRAPH)
def test_halo_bytes_equal_the_send_plans(runs, name):
    run_dir, record, rows, data = runs(name)
    parts = _parts(record, data)
    assert sum(sum(p.send_counts) for p in parts) > 0, "the ranks must exchange something, or the test proves nothing"
    widths = None
    for row in rows:
        if "assignment" in row:
            widths = {int(b): n for b, n in row["assignment"]["bits_histogram"].items()}
        assert row["comm_bytes"] == _expected_epoch_bytes(name, record, row, parts, widths), f"epoch {row['epoch']}"
    summary = record["summary"]
    assert (
        record["comm_bytes_per_epoch"]
        == summary["comm_bytes_per_epoch"]
        == sum(r["comm_bytes"] for r in rows) // len(rows)
    )
    by_layer = summary["comm_bytes_per_epoch_by_layer"]
    inputs = ["0.fwd"] if name.endswith("_inputs") else []
    assert sorted(by_layer) == sorted(inputs + [f"{layer}.{d}" for layer in range(1, LAYERS) for d in ("fwd", "bwd")])
    assert by_layer.get("0.fwd", 1) > 0
    assert sum(by_layer.values()) == pytest.approx(
        record["comm_bytes_per_epoch"], abs=len(by_layer)
    )  # integer division per layer
    if name == "adaptive":
        assert widths is not None and len({r["comm_bytes"] for r in rows}) > 1, (
            "the widths must change, or the test proves nothing"
        )
    if name == "pipeqs":
        sent = {bits for r in rows for bits, _ in r["messages"].values()}
        assert {2, 4, 8, 32} <= sent, f"every width must be sent, or the test proves little: {sent}"
    if name == "sylvie":
        widths = segment_widths(parts[0].in_degree[parts[0].send_idx], [int(c) for c in parts[0].send_counts], 1)
        assert len(set(widths.tolist())) > 1, "rows must travel at several widths, or the test proves little"


def test_pdadmm_bytes_equal_its_boundaries(runs):
    """pdADMM-G: per iteration and boundary between blocks, p down and q up, fp32, for every training node."""
    _, record, rows, data = runs("admm")
    blocks = record["summary"]["admm"]["layer_blocks"]
    (part,) = _parts({**record, "world_size": 1}, data)  # layer-parallel: one part, the whole graph
    expected = 2 * (len(blocks) - 1) * int(part.train_mask.sum()) * HIDDEN * 4
    assert len(blocks) == record["world_size"] == 2 and expected > 0
    assert [r["comm_bytes"] for r in rows] == [expected] * EPOCHS
    assert record["comm_bytes_per_epoch"] == expected


@pytest.mark.parametrize("name", list(RUNS))
def test_times_add_up(runs, name):
    _, record, rows, _ = runs(name)
    summary = record["summary"]
    for r in rows:
        # Each is the slowest rank's: comm and compute each fit in the epoch, and together cover it.
        assert 0 <= r["comm_time_s"] <= r["epoch_time_s"] and 0 <= r["compute_time_s"] <= r["epoch_time_s"], r
        assert r["comm_time_s"] + r["compute_time_s"] >= r["epoch_time_s"] * (1 - 1e-9), r
        assert r["overhead_time_s"] >= max(r["overhead_by_kind"].values()) >= 0
        assert 0 <= r["halo_comm_time_s"] <= r["comm_time_s"] + 1e-9  # the halo's share of the exposed time
        if name in (
            "sync",
            "uniform4",
            "sampling",
        ):  # every wait starts after its post: exposed is part of the transfer
            assert r["transfer_time_s"] >= r["halo_comm_time_s"] > 0, r
        if name not in ("pipeqs", "sylvie"):  # their widths change per message: some epochs send none quantized
            quantized = name in ("uniform4", "uniform4_inputs", "adaptive")
            assert (r["codec_time_s"] > 0) == quantized, r  # the codec runs exactly when messages are quantized
    if name in ("pipeqs", "sylvie"):
        assert any(r["codec_time_s"] > 0 for r in rows), rows
    assert record["epoch_time_s"] == summary["epoch_time_s"] == statistics.median(r["epoch_time_s"] for r in rows)
    assert record["comm_time_s"] == statistics.median(r["comm_time_s"] for r in rows)
    trailing = summary["overhead_time_s"] - sum(r["overhead_time_s"] for r in rows)
    assert trailing == pytest.approx(0.0, abs=1e-9), "no checkpoints: nothing after the last row"
    assert summary["overhead_by_kind"] == {
        k: pytest.approx(sum(r["overhead_by_kind"][k] for r in rows), rel=1e-12) for k in OVERHEAD_KINDS
    }
    assert summary["overhead_bytes"] == sum(r["overhead_bytes"] for r in rows)
    assert summary["training_time_s"] == pytest.approx(
        sum(r["epoch_time_s"] + r["overhead_time_s"] for r in rows), rel=1e-12
    )
    assert summary["throughput_epochs_per_s"] == pytest.approx(EPOCHS / summary["training_time_s"], rel=1e-12)


def test_adaqp_overheads_are_recorded_by_kind(runs):
    """AdaQP's α exchange and startup time model run before epoch 1, its reassignments before epochs 3 and 5."""
    _, record, rows, _ = runs("adaptive")
    assert rows[0]["overhead_by_kind"]["influence"] > 0 and rows[0]["overhead_bytes"] > 0
    assert [r["epoch"] for r in rows if r["overhead_by_kind"]["assign"] > 0] == [3, 5]
    assert all(r["overhead_bytes"] > 0 for r in rows if r["epoch"] in (3, 5))
    assert all(r["overhead_time_s"] == 0 and r["overhead_bytes"] == 0 for r in rows if r["epoch"] in (2, 4, 6))
    _, sync_record, _, _ = runs("sync")
    assert sync_record["summary"]["overhead_time_s"] == 0 and sync_record["summary"]["overhead_bytes"] == 0


@pytest.mark.parametrize("name", ["adaptive", "stale"])
def test_time_to_target_counts_epochs_and_overheads(runs, name):
    run_dir, _, rows, _ = runs(name)
    elapsed, expected = 0.0, []
    for r in rows:
        elapsed += r["epoch_time_s"] + r["overhead_time_s"]
        if r["val"] is not None:
            expected.append((pytest.approx(elapsed, rel=1e-12), r["val"]))
    curve = read_curve(run_dir)
    assert curve == expected and len(curve) == EPOCHS // 2
    first = curve[0]
    assert time_to_target(curve, first[1]) == first[0] >= rows[0]["epoch_time_s"] + rows[0]["overhead_time_s"]


def test_report_tables_hold_the_records_numbers(runs, tmp_path):
    records = {name: runs(name)[1] for name in ("sync", "stale", "uniform4")}
    dirs = [str(Path(runs(name)[0])) for name in records]
    report = [
        sys.executable,
        "-c",
        "from gnnq.cli import report_main; report_main()",
        *dirs,
        "--out",
        str(tmp_path),
    ]  # gnnq-report
    res = subprocess.run(
        report, capture_output=True, text=True, env=gnnq_env(tmp_path / "r", tmp_path / "d"), timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_csv(tmp_path / "groups.csv")
    assert len(table) == len(records)
    for rec in records.values():
        (match,) = [row for _, row in table.iterrows() if row["test_mean"] == rec["test"] and row["runs"] == 1]
        assert match["epoch_time_s_mean"] == pytest.approx(rec["epoch_time_s"], rel=1e-12)
        assert match["comm_bytes_per_epoch_mean"] == rec["comm_bytes_per_epoch"]
        assert match["best_val_mean"] == pytest.approx(rec["best_val"], rel=1e-12)
