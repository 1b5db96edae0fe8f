"""Every rerun line of every committed benchmark README under results/ (``gnnq`` + these reruns it) composes to its
row's config exactly, names the row's own ``experiment=`` preset and repeats nothing that preset sets (issue 45.17):
each line composed as gnnq composes it, against the row's config composed as gnnq-bench ran it (its sweep file and
its overrides, from results.json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnnq.bench.rerun_lines import check, committed_folders

RESULTS = Path(__file__).resolve().parents[2] / "results"
FOLDERS = committed_folders(RESULTS)


def test_the_committed_readmes_with_rerun_lines_are_found():
    assert len(FOLDERS) >= 8  # the both_ways, sancus and backward_influence benchmarks


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(RESULTS)) for f in FOLDERS])
def test_every_rerun_line_composes_to_its_rows_config(folder):
    assert check(folder) == []


def test_a_line_that_reruns_another_method_is_found(tmp_path):
    """The line issue 45.17 found: Vanilla's row rerun through experiment=adaqp_published (AdaQP) is refused."""
    import shutil

    src = RESULTS / "adaqp_emulated" / "both_ways" / "hosts2_paired"
    shutil.copy(src / "results.json", tmp_path / "results.json")
    text = (src / "README.md").read_text()
    wrong = text.replace("`experiment=adaqp_vanilla_published ", "`experiment=adaqp_published ", 1)
    assert wrong != text
    (tmp_path / "README.md").write_text(wrong)
    problems = check(tmp_path)
    assert len(problems) == 1 and "quantizer.name: 'adaptive', expected 'fp32'" in problems[0]
    assert "experiment=adaqp_vanilla_published" in problems[0]
    assert check(tmp_path, fix=True) and check(tmp_path) == []  # the generator's line composes
