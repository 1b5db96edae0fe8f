"""What a run leaves behind tells the true numbers: record.json and metrics.jsonl are strict JSON and say
where and with what the run ran; the W&B run's summary is the record, field for field (real gnnq runs,
W&B offline, read back from its run file).

Here: the in-process cases (no process started); the others are in `tests/e2e/test_records.py`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gnnq.track.files import strict_json, write_json_atomic


def _reject_constant(name: str):
    raise ValueError(f"not strict JSON: bare {name}")


def strict_load(text: str):
    return json.loads(text, parse_constant=_reject_constant)


def test_json_files_hold_null_for_nonfinite_numbers(tmp_path):
    obj = {
        "nan": float("nan"),
        "inf": [float("inf"), -math.inf],
        "np": np.float32("nan"),
        "ok": 0.5,
        "n": np.int64(3),
        "nested": {"t": (1.0, float("nan"))},
    }
    write_json_atomic(tmp_path / "x.json", obj)
    expected = {"nan": None, "inf": [None, None], "np": None, "ok": 0.5, "n": 3, "nested": {"t": [1.0, None]}}
    assert strict_load((tmp_path / "x.json").read_text()) == expected
    assert strict_load(strict_json(obj)) == expected
    with pytest.raises(ValueError, match="NaN"):
        strict_load(json.dumps({"x": float("nan")}))  # the parser these tests use does reject bare NaN
