"""The penalty schedule of pdADMM-G: rho (and nu where it follows rho) grows x10 when training stalls.

``parallel.rho_schedule``:

- ``none``: rho stays at ``parallel.rho``.
- ``grow``: rho x10 (up to ``rho_max``) once the training loss has stalled two iterations running;
  the next growth waits for two more stalled iterations.
- ``paper``: the rule of the authors' scripts (xianggebenben/pdADMM-G): from the fourth iteration
  on, rho x10 (up to ``rho_max``) after every iteration whose loss and the one before it each
  fell by less than the tolerance; nothing is reset after a growth, so a long stall grows rho
  every iteration until the cap.
- ``paper_q``: the rule of the authors' pdADMM-G-Q script for the full network
  (``pdADMM_G_Q_10_layer.py``): rho x10 only in two windows of the 0-based iteration i, each with
  its own cap (``Q_WINDOWS``: 21 <= i <= 49 up to 1e-2, i >= 51 up to 1e-3, so the second cap can
  lower rho), after an iteration whose loss fell by less than the tolerance while the loss before it
  rose (the second comparison has no tolerance there); ``rho_max`` caps on top.

"Stalled" means the mean training cross-entropy of the network's forward pass fell by less than
``STALL_TOLERANCE``; the schedule reads every iteration's loss (trainer.eval_every=1).
"""

from __future__ import annotations

SCHEDULES = ("none", "grow", "paper", "paper_q")
STALL_TOLERANCE = 1e-3
# paper_q: (first iteration, last iteration or None, cap), 0-based iterations as the authors' script counts them
Q_WINDOWS = ((21, 49, 1e-2), (51, None, 1e-3))


def q_window_cap(i: int) -> float | None:
    """The paper_q cap at 0-based iteration ``i``; None outside the windows (no growth there)."""
    return next((cap for lo, hi, cap in Q_WINDOWS if lo <= i and (hi is None or i <= hi)), None)


class RhoSchedule:
    def __init__(self, rho: float, mode: str = "none", cap: float = 1.0, tol: float = STALL_TOLERANCE):
        if mode not in SCHEDULES:
            raise ValueError(f"rho schedule {mode!r} is not allowed; allowed: {', '.join(SCHEDULES)}")
        self.rho, self.mode, self.cap, self.tol = float(rho), mode, float(cap), float(tol)
        self.losses: list[float] = []
        self.count = 0  # losses seen so far (the next one's 0-based iteration)

    def state_dict(self) -> dict:
        return {"rho": self.rho, "losses": list(self.losses), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.rho, self.losses = float(state["rho"]), list(state["losses"])
        self.count = int(state.get("count", len(self.losses)))

    def after(self, loss: float) -> None:
        """Called with every iteration's training loss, in order."""
        self.losses.append(loss)
        self.count += 1
        if self.mode == "paper_q":
            self._after_q(self.count - 1)
            return
        if self.mode == "none" or len(self.losses) < (4 if self.mode == "paper" else 3):
            return
        a, b, c = self.losses[-3:]
        if c > b - self.tol and b > a - self.tol:
            self.rho = min(10.0 * self.rho, self.cap)
            if self.mode == "grow":
                self.losses.clear()  # the next growth needs two more stalled iterations
            else:
                del self.losses[:-3]  # the paper rule only reads the last three

    def _after_q(self, i: int) -> None:
        del self.losses[:-3]
        cap = q_window_cap(i)
        if cap is None or len(self.losses) < 3:
            return
        a, b, c = self.losses
        if c > b - self.tol and b > a:
            self.rho = min(10.0 * self.rho, cap, self.cap)
