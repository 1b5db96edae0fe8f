"""Resources and caches: ranks that would not fit in memory are refused before launch; too many ranks per
core warn; a damaged partition cache is rebuilt with a warning, never used."""

from __future__ import annotations

import os

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import FAST, failed
from tests.reliability.context import Context

CORES = len(os.sched_getaffinity(0))
CROWD = 4 * CORES + 1  # more than 4 ranks per core


def _no_oversubscribe_warning(_: Context, outcome: Outcome) -> list[str]:
    return [f"unexpected warning: {w}" for w in outcome.warnings() if "allow_oversubscribe" in w]


def _earlier_run(ctx: Context) -> None:
    """A finished run whose partition cache entry the case then damages."""
    first = ctx.run([*FAST, "cluster.nproc=2"], timeout_s=300)
    if first.proc.returncode != 0:
        raise RuntimeError(f"the earlier run failed: {first.last_line}")


def _damage_part(ctx: Context) -> None:
    _earlier_run(ctx)
    (part,) = ctx.data.glob("parts/*/part1.pt")
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))


def _delete_meta(ctx: Context) -> None:
    _earlier_run(ctx)
    (meta,) = ctx.data.glob("parts/*/meta.json")
    meta.unlink()


CASES = [
    Case(
        "resources",
        "not-enough-memory",
        "2 ranks with cluster.memory_limit_gib=0.5 (the launcher fits, the ranks do not)",
        failed(
            r"not enough memory: the 2 rank\(s\) on this host need about .* but 0\.5 GiB is available "
            r"\(cluster\.memory_limit_gib=0\.5\)"
        ),
        args=[*FAST, "cluster.nproc=2", "cluster.memory_limit_gib=0.5"],
    ),
    Case(
        "resources",
        "oversubscribed",
        f"{CROWD} ranks on {CORES} cores: one warning (then refused: memory limit 2 GiB)",
        failed(
            rf"not enough memory: the {CROWD} rank\(s\)",
            warning=rf"{CROWD} ranks on {CORES} core\(s\).*allow_oversubscribe=true",
        ),
        args=[*FAST, f"cluster.nproc={CROWD}", "cluster.memory_limit_gib=2"],
    ),
    Case(
        "resources",
        "oversubscribe-allowed",
        "the same with cluster.allow_oversubscribe=true: no warning",
        failed(rf"not enough memory: the {CROWD} rank\(s\)"),
        verify=_no_oversubscribe_warning,
        args=[*FAST, f"cluster.nproc={CROWD}", "cluster.memory_limit_gib=2", "cluster.allow_oversubscribe=true"],
    ),
    Case(
        "cache",
        "damaged-partition",
        "a cached part with one bit flipped: rebuilt with a warning, the run goes on",
        Expect(exit=0, records=("ok",), warning=r"rebuilding the partition cache entry .*part1\.pt"),
        args=[*FAST, "cluster.nproc=2"],
        setup=_damage_part,
    ),
    Case(
        "cache",
        "missing-meta",
        "a cache entry without meta.json: rebuilt with a warning",
        Expect(exit=0, records=("ok",), warning=r"rebuilding the partition cache entry"),
        args=[*FAST, "cluster.nproc=2"],
        setup=_delete_meta,
    ),
]


CASES += [
    Case(
        "resources",
        "model-state-counted",
        "model.hidden=8000 on 200 nodes, 1 rank, cluster.memory_limit_gib=1 (issue 31.7): weights, gradients and "
        "Adam's 2 moments (1 GiB) counted",
        failed(
            r"not enough memory: the 1 rank\(s\) on this host need about 1\.[0-9] GiB .*4 B x P x \(2 \+ s\) for the "
            r"model"
        ),
        args=[
            "logger=none",
            "dataset.num_nodes=200",
            "trainer.epochs=2",
            "model.hidden=8000",
            "cluster.nproc=1",
            "cluster.memory_limit_gib=1",
        ],
    ),
]
