"""A rank's heartbeat: where it is, written every second, so a failed job can tell which rank stopped.

A daemon thread of each rank rewrites ``<run dir>/.gnnq/heartbeat-rank<r>.json`` every
``HEARTBEAT_INTERVAL_S`` (gnnq.contract) with the time, whether the rank's main thread is inside
communication (a frame of torch.distributed or gnnq.comm on its stack) and since when, and its
innermost gnnq frame. When a peer's collective times out, gnnq.launch.failure reads them: a rank
whose heartbeat stopped long before (its process was stopped, SIGSTOP, or frozen) or that stayed
outside communication (a hang in its own code) is the one that did not arrive.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from gnnq.contract import HEARTBEAT_FILE, HEARTBEAT_INTERVAL_S

_COMM_MODULES = (f"{os.sep}torch{os.sep}distributed{os.sep}", f"{os.sep}gnnq{os.sep}comm{os.sep}")
_ELASTIC = f"{os.sep}torch{os.sep}distributed{os.sep}elastic{os.sep}"
_GNNQ = f"{os.sep}gnnq{os.sep}"


def heartbeat_path(internal_dir: Path, rank: int) -> Path:
    return Path(internal_dir) / HEARTBEAT_FILE.format(rank=rank)


def where(frame) -> tuple[bool, str]:
    """(whether the stack from ``frame`` outward is in communication, its innermost gnnq frame).

    The innermost frame of gnnq or torch.distributed decides: one of torch.distributed (not its elastic
    launcher, which wraps every rank's entry point) or gnnq.comm is communication, any other of gnnq is not."""
    communicating, place = None, ""
    while frame is not None:
        name = frame.f_code.co_filename
        if communicating is None and _ELASTIC not in name and any(m in name for m in _COMM_MODULES):
            communicating = True
        if _GNNQ in name:
            communicating = bool(communicating)
            place = f"gnnq{os.sep}{name.rsplit(_GNNQ, 1)[1]}:{frame.f_lineno} in {frame.f_code.co_name}"
            break
        frame = frame.f_back
    return bool(communicating), place


def start_heartbeat(internal_dir: Path, rank: int, interval_s: float = HEARTBEAT_INTERVAL_S) -> threading.Event:
    """Start this rank's heartbeat thread (a daemon: it ends with the process); set the returned event to stop it."""
    stop = threading.Event()
    path = heartbeat_path(internal_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    main = threading.main_thread().ident

    def beat() -> None:
        state, since = None, time.time()
        tmp = path.with_name(f".{path.name}.tmp")
        while True:
            now = time.time()
            communicating, place = where(sys._current_frames().get(main))
            if communicating != state:
                state, since = communicating, now
            try:
                tmp.write_text(
                    json.dumps(
                        {"rank": rank, "time": now, "communicating": communicating, "since": since, "where": place}
                    )
                )
                os.replace(tmp, path)
            except OSError:  # a full or vanished run dir: the launcher then has no heartbeat to go by
                try:
                    tmp.unlink(missing_ok=True)  # no empty file left behind
                except OSError:
                    pass
            if stop.wait(interval_s):
                return

    threading.Thread(target=beat, name=f"gnnq-heartbeat-rank{rank}", daemon=True).start()
    return stop
