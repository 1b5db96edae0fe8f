"""A warm pool's rank: ``python -m gnnq.rank.serve --timeout-s T`` (gnnq.launch.warm_pool starts it).

As ``python -m gnnq.rank``: before importing anything heavy, it asks Linux to SIGKILL it when its launcher dies
(gnnq.rank.__main__.die_with_parent), and exits at once if the launcher is already gone. The work is gnnq.rank.warm.
"""

from __future__ import annotations

from gnnq.rank.__main__ import die_with_parent

if __name__ == "__main__":
    die_with_parent()
    from gnnq.rank.warm import main

    main()
