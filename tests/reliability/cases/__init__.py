"""The catalogue: every case, family by family, in the order they run."""

from __future__ import annotations

import re

from tests.reliability.case import Case
from tests.reliability.cases import (
    concurrency,
    config,
    data,
    faults,
    names,
    places,
    report,
    resources,
    resume,
    secrets,
)

FAMILIES = (config, data, resources, faults, resume, places, concurrency, secrets, report, names)


def catalogue() -> list[Case]:
    cases = [case for module in FAMILIES for case in module.CASES]
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"case ids used twice: {dupes}")
    return cases


def select(pattern: str | None) -> list[Case]:
    """The cases whose id (``family/name``) matches ``pattern`` (a regex searched in it); all for None."""
    cases = catalogue()
    return cases if not pattern else [c for c in cases if re.search(pattern, c.id)]
