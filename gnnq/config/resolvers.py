"""gnnq's OmegaConf resolvers, registered on import (gnnq.config.compose imports this module, and so does the
launcher's Hydra callback, which travels with every job):

* ``${gnnq_path:P}``: ``P`` with a leading ``~`` expanded as a shell would (``runs_root`` from ``GNNQ_RUNS='~/runs'``);
* ``${gnnq_assign_cycle:EPOCHS}``: AdaQP's default reassignment cycle, a quarter of the run (its 4 assignments per
  run: 50 of 200 epochs), at least 1, so that an adaptive run of any length reassigns (docs/methods.md).
"""

from __future__ import annotations

import os

from omegaconf import OmegaConf

ASSIGNMENTS_PER_RUN = 4  # AdaQP: assign_cycle = 50 of 200 epochs


def expand_path(path):
    return os.path.expanduser(path) if isinstance(path, str) else path


def default_assign_cycle(epochs) -> int:
    return max(1, int(epochs) // ASSIGNMENTS_PER_RUN)


RESOLVERS = {"gnnq_path": expand_path, "gnnq_assign_cycle": default_assign_cycle}


def register() -> None:
    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


register()
