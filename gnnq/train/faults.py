"""Fault injection for tests: break one rank at one epoch."""

from __future__ import annotations

import os
import time

FAULT_ENV = "GNNQ_FAULT_INJECT"


class FaultInjector:
    """Test hook: GNNQ_FAULT_INJECT="rank=R,epoch=E[,mode=M]" breaks rank R at the start of epoch E.

    ``mode=raise`` (default) raises; ``mode=hang`` stops taking part in collectives (sleeps until killed).
    """

    MODES = ("raise", "hang")

    def __init__(self, spec: str | None, rank: int):
        fields = dict(kv.split("=") for kv in spec.split(",")) if spec else {}
        self.epoch = int(fields["epoch"]) if fields and int(fields.get("rank", -1)) == rank else None
        self.mode = fields.get("mode", "raise")
        if self.mode not in self.MODES:
            raise ValueError(f"GNNQ_FAULT_INJECT mode={self.mode}: must be one of {', '.join(self.MODES)}")

    @classmethod
    def from_env(cls, rank: int) -> "FaultInjector":
        """The fault ``GNNQ_FAULT_INJECT`` asks for, if it names this rank."""
        return cls(os.environ.get(FAULT_ENV), rank)

    def check(self, epoch: int) -> None:
        if epoch != self.epoch:
            return
        if self.mode == "raise":
            raise RuntimeError(f"injected fault at epoch {epoch}")
        while True:  # hang: the peers block in their next collective until cluster.timeout_s
            time.sleep(3600)
