"""Peak memory is the process's own: a process started by a bigger one (a rank by torchrun, a script by pytest)."""

from __future__ import annotations

import subprocess
import sys

CHILD = "from gnnq.track.process_memory import peak_rss_mib; print(peak_rss_mib())"


def test_a_child_of_a_big_process_reports_its_own_peak():
    ballast = bytearray(600 * 2**20)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # resident, page by page
    own = float(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout)
    del ballast
    # An interpreter and one small module; getrusage's ru_maxrss said over 600 here (Linux carries the parent's
    # peak over exec), and so did every rank's summary.peak_memory_mib_per_rank where torchrun's agent was bigger.
    assert 5 < own < 300, own
