"""The rank entry point: ``python -m gnnq.rank --run-dir D --parts P`` (gnnq.launch.ranks or torchrun start it).

Before importing anything heavy, a rank asks Linux to SIGKILL it when its parent (the launcher, or torchrun's
agent) dies (PR_SET_PDEATHSIG), and exits at once if that parent is already gone: no rank outlives a launcher
killed by SIGKILL, not even one still importing torch. The work itself is gnnq.rank.worker.
"""

from __future__ import annotations

import os

from gnnq import lifetime
from gnnq.contract import LAUNCHER_PID_ENV


def die_with_parent() -> None:
    if not lifetime.die_with_parent(lifetime.libc_prctl()):
        return
    launcher = os.environ.get(LAUNCHER_PID_ENV)
    if launcher and os.getppid() != int(launcher):  # it died before the request above
        os._exit(1)


if __name__ == "__main__":
    die_with_parent()
    from gnnq.rank.worker import main

    main()
