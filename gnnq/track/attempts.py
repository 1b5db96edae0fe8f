"""A resumed run's attempts in its record: each attempt's code (git commit), data (fingerprint), start epoch and
outcome, so a run trained partly by one commit and partly by another says so (``record["attempts"]``)."""

from __future__ import annotations

ATTEMPT_KEYS = (
    "status",
    "error",
    "git_commit",
    "git_dirty",
    "dataset_fingerprint",
    "resumed_from_epoch",
    "finished_at",
)


def attempt_of(record: dict) -> dict:
    """One attempt's entry, from the record it ended with."""
    return {key: record.get(key) for key in ATTEMPT_KEYS}


def earlier_attempts(record: dict | None) -> list[dict]:
    """The attempts before a resume: the earlier record's list, or the earlier record itself as the first one."""
    if not record:
        return []
    return [dict(a) for a in record["attempts"]] if record.get("attempts") else [attempt_of(record)]


def with_attempts(record: dict, earlier: list[dict]) -> dict:
    """``record`` with ``attempts``: the ``earlier`` ones, then this one."""
    record["attempts"] = [*earlier, attempt_of(record)]
    return record
