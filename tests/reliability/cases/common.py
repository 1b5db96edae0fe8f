"""Settings shared by the case families: small, fast runs and the expectation shapes that recur."""

from __future__ import annotations

from tests.reliability.case import Expect

# 600 nodes, 2 ranks, 2 epochs: a full torchrun job in ~15-40 s on a loaded 2-core machine.
FAST = ["logger=none", "dataset.num_nodes=600", "model.hidden=16", "trainer.epochs=2"]
# the same, running until stopped (fault cases break it mid-training)
ENDLESS = ["logger=none", "dataset.num_nodes=600", "model.hidden=16", "trainer.epochs=100000"]


def refused(line: str) -> Expect:
    """Stopped before anything runs: exit 2, one line, no run dir, no record."""
    return Expect(exit=2, line=r"^gnnq: error: .*?" + line)


def failed(line: str, **kwargs) -> Expect:
    """A run that failed: exit 1, one line, a record marked failed."""
    return Expect(exit=1, line=r"^gnnq: error: .*?" + line, records=("failed",), **kwargs)


OK = Expect(exit=0, records=("ok",))
