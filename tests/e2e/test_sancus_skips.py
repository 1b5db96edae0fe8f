"""experiment=sancus skips on Cora: the change it measures is that of the embeddings before dropout, so with the
peers' model (dropout 0.5) owners skip most epochs' forward messages and the run sends fewer halo bytes than Vanilla.
(Compared after dropout, every epoch's rows carry a new mask, a relative change of about 1, and it never skipped:
1,118,212 bytes against Vanilla's 1,118,208 on this setting.)"""

from __future__ import annotations

from tests.cli_helpers import read_record, run_dirs, run_gnnq

COMMON = ["dataset=cora", "cluster.nproc=2", "trainer.epochs=40", "trainer.eval_every=5", "logger=none"]


def test_sancus_sends_fewer_halo_bytes_than_vanilla_on_cora(tmp_path, planetoid_root):
    records = {}
    for name in ("adaqp_vanilla", "sancus"):
        res = run_gnnq([f"experiment={name}", *COMMON], tmp_path / name, planetoid_root, timeout=900)
        assert res.returncode == 0, res.stderr[-2000:]
        (run_dir,) = run_dirs(tmp_path / name)
        records[name] = read_record(run_dir)
    vanilla, sancus = records["adaqp_vanilla"], records["sancus"]
    assert sancus["comm_bytes_per_epoch"] < 0.8 * vanilla["comm_bytes_per_epoch"], (
        sancus["comm_bytes_per_epoch"],
        vanilla["comm_bytes_per_epoch"],
    )
    skipped, exact = (
        sancus["summary"]["comm_bytes_per_epoch_by_layer"],
        vanilla["summary"]["comm_bytes_per_epoch_by_layer"],
    )
    for layer in ("1", "2"):
        assert skipped[f"{layer}.fwd"] < 0.7 * exact[f"{layer}.fwd"], (layer, skipped, exact)  # every layer skips
        assert skipped[f"{layer}.bwd"] == exact[f"{layer}.bwd"]  # backward is exact every epoch
    assert sancus["test"] > vanilla["test"] - 0.03, (sancus["test"], vanilla["test"])
