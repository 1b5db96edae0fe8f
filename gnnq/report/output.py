"""gnnq-report's files in ``--out``: each written whole or not at all (a temporary file beside it, renamed over it,
as the run records are), and a place that cannot take them named in one line."""

from __future__ import annotations

from pathlib import Path

from gnnq.errors import GnnqError, describe_os_error
from gnnq.track.files import write_atomic, write_text_atomic


class OutError(GnnqError):
    """``--out`` cannot hold the report (a file in its place, a full or read-only filesystem)."""


def check_out(out: Path | None) -> None:
    """Before any work: ``--out`` must be a directory or not exist yet."""
    if out is not None and out.exists() and not out.is_dir():
        raise OutError(f"--out {out} is a file, not a directory; give a directory (it is made if missing)")


def cannot_write(exc: OSError) -> OutError:
    """The one line for a file of the report the filesystem refused (its path and the errno's name)."""
    return OutError(
        f"--out: cannot write {exc.filename} ({describe_os_error(exc)}); nothing partial is left there: free "
        "space, or give --out a writable directory"
    )


def write_text(path: Path, text: str) -> None:
    write_text_atomic(path, text)


def write_csv(path: Path, frame) -> None:
    write_text_atomic(path, frame.to_csv(index=False))


def save_figure(fig, path: Path, **kwargs) -> None:
    write_atomic(path, lambda f: fig.savefig(f, format=path.suffix.lstrip("."), **kwargs))
