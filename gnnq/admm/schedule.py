"""The penalty schedule of pdADMM-G: rho (and nu where it follows rho) grows x10 when training stalls.

``parallel.rho_schedule``:

- ``none``: rho stays at ``parallel.rho``.
- ``grow``: rho x10 (up to ``rho_max``) once the training loss has stalled two iterations running;
  the next growth waits for two more stalled iterations.
- ``paper``: the rule of the authors' scripts (xianggebenben/pdADMM-G): from the fourth iteration
  on, rho x10 (up to ``rho_max``) after every iteration whose loss and the one before it each
  fell by less than the tolerance; nothing is reset after a growth, so a long stall grows rho
  every iteration until the cap.

"Stalled" means the mean training cross-entropy of the network's forward pass fell by less than
``STALL_TOLERANCE``; the schedule reads every iteration's loss (trainer.eval_every=1).
"""

from __future__ import annotations

SCHEDULES = ("none", "grow", "paper")
STALL_TOLERANCE = 1e-3


class RhoSchedule:
    def __init__(self, rho: float, mode: str = "none", cap: float = 1.0, tol: float = STALL_TOLERANCE):
        if mode not in SCHEDULES:
            raise ValueError(f"rho schedule {mode!r} is not allowed; allowed: {', '.join(SCHEDULES)}")
        self.rho, self.mode, self.cap, self.tol = float(rho), mode, float(cap), float(tol)
        self.losses: list[float] = []

    def state_dict(self) -> dict:
        return {"rho": self.rho, "losses": list(self.losses)}

    def load_state_dict(self, state: dict) -> None:
        self.rho, self.losses = float(state["rho"]), list(state["losses"])

    def after(self, loss: float) -> None:
        """Called with every iteration's training loss, in order."""
        self.losses.append(loss)
        if self.mode == "none" or len(self.losses) < (4 if self.mode == "paper" else 3):
            return
        a, b, c = self.losses[-3:]
        if c > b - self.tol and b > a - self.tol:
            self.rho = min(10.0 * self.rho, self.cap)
            if self.mode == "grow":
                self.losses.clear()  # the next growth needs two more stalled iterations
            else:
                del self.losses[:-3]  # the paper rule only reads the last three
