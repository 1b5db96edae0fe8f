"""One registry per config group: it matches conf/, validate and the dispatch, and another option's keys are refused.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_registries.py`.
"""

from __future__ import annotations


def test_the_command_line_refuses_a_key_of_another_option_with_exit_code_2(tmp_path):
    from tests.cli_helpers import run_gnnq

    res = run_gnnq(
        ["dataset=cora", "dataset.num_nodes=500", "parallel.sampling_rate=0.5"],
        tmp_path / "runs",
        tmp_path / "data",
        timeout=120,
    )
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines == [
        "gnnq: error: dataset.num_nodes: no such key for dataset=cora; allowed keys: name, root, download, "
        "to_undirected"
    ]
    assert not list((tmp_path / "runs").rglob("record.json"))
