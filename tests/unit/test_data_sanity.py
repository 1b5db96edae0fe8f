"""Bad data and too little memory stop before any rank starts, with the real CLI on real files.

Each case: one ``gnnq: error:`` line naming the file, key or path and what is allowed, exit code 1,
a run dir whose record.json is ``failed`` with that line as its error, and the data left as it was.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_data_sanity.py`.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value", ["0", "-1.5"])
def test_memory_limit_must_be_positive(value):
    from gnnq.config.compose import compose_config
    from gnnq.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        compose_config([f"cluster.memory_limit_gib={value}"])
    assert str(e.value) == f"cluster.memory_limit_gib={float(value)} is not allowed; it must be null or > 0 (GiB)"
