"""Every case of the reliability catalogue as one pytest test, through the same runner as
``python -m tests.reliability`` (its setup, the real ``gnnq`` command, its expectations and the global checks).

Marked ``catalogue``: the whole catalogue takes about 23 minutes on 2 cores, so the default selection leaves it
out. ``pytest -m catalogue tests/reliability`` runs it all; ``-k 'config/'`` a family. A case that cannot be set up
on this machine (a mount without root) is skipped, as the catalogue's table marks it ``skip``.
"""

from __future__ import annotations

import pytest

from tests.reliability.cases import catalogue
from tests.reliability.runner import run_case

CASES = {case.id: case for case in catalogue()}


@pytest.mark.catalogue
@pytest.mark.parametrize("case_id", list(CASES))
def test_case(tmp_path, case_id):
    result = run_case(CASES[case_id], tmp_path)
    if result["result"] == "skip":
        pytest.skip(result["observed"])
    assert result["result"] == "pass", f"observed: {result['observed']}; problems: {'; '.join(result['problems'])}"
