"""Dataset loaders, one module per source, and the small helpers they share.

Every loader returns a :class:`gnnq.data.graph.Graph` whose edges went through
:func:`canonical_edges` and raises :class:`gnnq.errors.DatasetError` with one complete
line when files are missing or unreadable.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from gnnq.errors import DatasetError, describe_os_error

DOWNLOAD_TIMEOUT_S = 60.0


def canonical_edges(edge_index: np.ndarray, num_nodes: int, undirected: bool = False) -> np.ndarray:
    """Return int64 (2, E) edges without self loops or duplicates, sorted by (src, dst).

    With ``undirected`` every edge is present in both directions.
    """
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    return edges_from_keys(edge_keys(ei[0], ei[1], num_nodes, undirected), num_nodes)


def edge_keys(src: np.ndarray, dst: np.ndarray, num_nodes: int, undirected: bool = False) -> np.ndarray:
    """``src * num_nodes + dst`` (int64) of every edge but self loops; with ``undirected`` also of every reversed edge.

    One array of the result's size and one of the input's is all it allocates (a products-size graph's
    edges are gigabytes): a caller that drops ``src`` and ``dst`` afterwards holds only the keys."""
    keep = np.flatnonzero(np.asarray(src) != np.asarray(dst)) if src.size else np.empty(0, dtype=np.int64)
    if keep.size == src.size:
        keep = slice(None)
    m = src[keep].size
    n = np.int64(num_nodes)
    key = np.empty(2 * m if undirected else m, dtype=np.int64)
    np.multiply(src[keep], n, out=key[:m], dtype=np.int64, casting="unsafe")
    key[:m] += dst[keep]
    if undirected:
        np.multiply(dst[keep], n, out=key[m:], dtype=np.int64, casting="unsafe")
        key[m:] += src[keep]
    return key


def edges_from_keys(key: np.ndarray, num_nodes: int) -> np.ndarray:
    """Sorted, deduplicated int64 (2, E) edges from ``edge_keys``'s keys; sorts ``key`` in place (it is consumed)."""
    key.sort()  # sort + neighbor compare: much faster than np.unique on large int arrays
    if key.size:
        first = np.empty(key.shape, dtype=bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        if not first.all():
            key = key[first]
        del first
    out = np.empty((2, key.size), dtype=np.int64)
    np.floor_divide(key, num_nodes, out=out[0])
    np.remainder(key, num_nodes, out=out[1])
    return out


def missing_files(directory: Path, names: Iterable[str]) -> list[str]:
    """Names (relative to ``directory``) that are not regular files there."""
    return [n for n in names if not (directory / n).is_file()]


def missing_files_message(
    dataset: str, directory: Path, needed: Sequence[str], missing: Sequence[str], hint: str
) -> str:
    """``<dataset>: files missing in <dir>: need a, b, c (missing: b, c) (<hint>)`` on one line."""
    what = f"need {', '.join(needed)}"
    if list(missing) != list(needed):
        what += f" (missing: {', '.join(missing)})"
    return f"{dataset}: files missing in {directory}: {what} ({hint})"


def no_download_hint(root_key: str = "dataset.root") -> str:
    return (
        f"dataset.download=false; put them there, point {root_key} or GNNQ_DATA at a root that holds them, or "
        "set dataset.download=true"
    )


def download_failed_hint(reason: str) -> str:
    return (
        f"download failed: {reason}; put the files there by hand or set dataset.root / GNNQ_DATA to a root that "
        "holds them"
    )


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)  # a place that takes no more bytes


def write_failure(exc: BaseException) -> OSError | None:
    """The OSError of a write that found no room (full disk, quota, file size limit, read-only) in ``exc`` or
    what caused it (a third-party reader wraps it); None when there is none."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def one_line(exc: BaseException) -> str:
    """``TypeName: first line of the message``, for embedding in a one-line error."""
    text = str(exc).strip().splitlines()
    first = text[0].strip() if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@contextlib.contextmanager
def bounded_network(timeout_s: float = DOWNLOAD_TIMEOUT_S) -> Iterator[None]:
    """Give sockets opened inside (third-party downloads) a timeout so a stalled one fails."""
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout_s)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


@contextlib.contextmanager
def quiet_and_non_interactive() -> Iterator[None]:
    """Silence a third-party call's prints and make any ``input()`` it tries fail at once."""
    old_stdin = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdin = old_stdin


@contextlib.contextmanager
def dataset_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` so concurrent loads (ranks, sweep points) do not
    download or process the same files at the same time.

    The lock is ``flock`` on ``<directory>/.gnnq.lock``. Where that file cannot be created (a read-only
    dataset root: nothing can be downloaded or processed there, only read), the directory itself is
    locked instead, and where that fails too (NFS locks only files open for writing) the read goes
    unlocked: the files are checked against their checksums before they are used."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(
            f"cannot create the dataset folder {directory} ({describe_os_error(exc)}); "
            "point dataset.root or GNNQ_DATA at a writable root, or put the files there"
        ) from None
    try:
        fd = os.open(directory / ".gnnq.lock", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    except OSError as exc:
        if exc.errno not in _NOT_WRITABLE:
            raise
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError) if _is_directory(fd) else contextlib.nullcontext():
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _is_directory(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)
