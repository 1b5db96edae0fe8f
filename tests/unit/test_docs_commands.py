"""The docs' checked commands (tests/checked_commands.py) are well formed, and the shape check tells a drifted output
from one that only differs in numbers, paths and times; tests/e2e/test_docs_commands.py runs them."""

from __future__ import annotations

import pytest

from tests.checked_commands import checked_commands, missing_lines


def test_the_docs_mark_their_commands_and_every_mark_is_well_formed():
    found = checked_commands()
    commands = [" ".join(c.command) for c in found]
    assert "gnnq logger=none trainer.epochs=50" in commands and "gnnq trainer.epoch=3" in commands
    assert all(c.output for c in found), [c.where for c in found if not c.output]


def test_the_shape_ignores_numbers_paths_and_padding_but_not_words(tmp_path):
    quoted = [
        "[gnnq] run dir: /tmp/elsewhere/runs/2026-12-02/07-20-19-956129_synthetic_gcn",
        "epoch 50/50 [####] 00:21<00:00, loss 0.3652  val 0.9045 (best 0.9045)  epoch 432.6 ms",
        "| status                         | ok            |",
        "|--------------------------------|---------------|",
    ]
    real = (
        "[gnnq] run dir: /x/runs/2027-01-01/01-00-00-000001_synthetic_gcn\n"
        "[gnnq] warning: something in between\n"
        "epoch 1/50 [#   ] 00:01<00:49, loss 1.0\repoch 50/50 [####] 00:30<00:00, loss 0.3  val 0.91 (best 0.92)  "
        "epoch 512.0 ms\n"
        "| status   | ok |\n"
        "|----------|----|\n"
    )
    assert missing_lines(quoted, real) == []
    assert missing_lines(quoted, real.replace("(best", "(top")) == [quoted[1]]  # a word changed
    assert missing_lines(quoted, real.replace("| status ", "| state ")) == [quoted[2]]
    assert missing_lines(list(reversed(quoted[:2])), real) == [quoted[0]]  # order counts


def test_a_marker_without_a_block_or_entry_point_is_an_error(tmp_path):
    bad = tmp_path / "doc.md"
    bad.write_text("<!-- checked-command -->\ntext\n")
    with pytest.raises(ValueError, match="right before a fenced block"):
        checked_commands([bad])
    bad.write_text("<!-- checked-command -->\n```\n$ rm -rf /\n```\n")
    with pytest.raises(ValueError, match="must start with one of gnnq"):
        checked_commands([bad])
    bad.write_text("<!-- checked-command: gnnq-report runs (checked with --criterion test) -->\n```\nok\n```\n")
    (c,) = checked_commands([bad])
    assert c.command == ["gnnq-report", "runs"] and c.extra == ["--criterion", "test"] and c.output == ["ok"]
