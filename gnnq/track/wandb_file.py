"""Read an offline W&B run (``<run_dir>/wandb/offline-run-*/run-<id>.wandb``) without syncing it.

wandb keeps an offline run's history, summary and artifacts in that one file: a LevelDB log
(https://github.com/google/leveldb/blob/main/doc/log_format.md) after a 7-byte header, each
record a serialized ``wandb.proto.wandb_internal_pb2.Record``. Nothing else holds the summary
until ``wandb sync`` (there is no ``wandb-summary.json``), so this is how a test, or a user
with no account, checks what a run would upload.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

FILE_HEADER = struct.Struct("<4sHB")  # ident, magic, version
FILE_IDENT, FILE_MAGIC, FILE_VERSION = b":W&B", 0xBEE1, 0
RECORD_HEADER = struct.Struct("<IHB")  # checksum, length, type
BLOCK_LEN = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    """The file is not a whole W&B run log."""


@dataclass
class OfflineRun:
    """What an offline run file says: its run record, history rows, final summary and artifacts."""

    run_id: str = ""
    name: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)  # one dict per run.log call, with _step
    summary: dict = field(default_factory=dict)  # the summary as the last summary update left it
    artifacts: list[dict] = field(default_factory=list)  # name, type, files: {path in artifact: local path}
    exit_code: int | None = None


def read_records(path: Path) -> list[bytes]:
    """The payloads of every whole record in the LevelDB log at ``path`` (checksums verified)."""
    data = Path(path).read_bytes()
    if len(data) < FILE_HEADER.size:
        raise WandbFileError(f"{path}: too short for a W&B run file")
    ident, magic, version = FILE_HEADER.unpack_from(data)
    if (ident, magic, version) != (FILE_IDENT, FILE_MAGIC, FILE_VERSION):
        raise WandbFileError(f"{path}: not a W&B run file (header {ident!r} {magic:#x} v{version})")
    records, pending, pos = [], None, FILE_HEADER.size
    while pos + RECORD_HEADER.size <= len(data):
        left_in_block = BLOCK_LEN - pos % BLOCK_LEN
        if left_in_block < RECORD_HEADER.size:  # zero trailer of a block
            pos += left_in_block
            continue
        checksum, length, kind = RECORD_HEADER.unpack_from(data, pos)
        pos += RECORD_HEADER.size
        chunk = data[pos : pos + length]
        if kind == 0 and length == 0:  # zero padding (a preallocated or cut tail)
            break
        if len(chunk) < length:
            break  # the writer was stopped mid-record: what came before is whole
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != checksum:
            raise WandbFileError(f"{path}: checksum mismatch in the record at byte {pos - RECORD_HEADER.size}")
        pos += length
        if kind == FULL:
            records.append(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE and pending is not None:
            pending += chunk
        elif kind == LAST and pending is not None:
            records.append(pending + chunk)
            pending = None
        else:
            raise WandbFileError(
                f"{path}: record of type {kind} out of order at byte {pos - length - RECORD_HEADER.size}"
            )
    return records


def read_offline_run(path: Path) -> OfflineRun:
    """Parse ``run-<id>.wandb`` (or the ``offline-run-*`` directory holding it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("run-*.wandb"))
        if len(files) != 1:
            raise WandbFileError(f"{path}: expected one run-*.wandb file, found {len(files)}")
        path = files[0]
    run = OfflineRun()
    for payload in read_records(path):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.name, run.group, run.tags = (
                record.run.run_id,
                record.run.display_name,
                record.run.run_group,
                list(record.run.tags),
            )
        elif kind == "history":
            run.history.append(_items(record.history.item))
        elif kind == "summary":
            _apply(run.summary, record.summary.update, record.summary.remove)
        elif kind == "artifact":
            run.artifacts.append(_artifact(record.artifact))
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def _items(items) -> dict:
    row: dict = {}
    _apply(row, items, ())
    return row


def _apply(target: dict, updates, removes) -> None:
    """Set each item (a key, or a nested key path: nested dicts) to its JSON value; drop the removed keys."""
    for item in updates:
        *parents, leaf = list(item.nested_key) or [item.key]
        node = target
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = json.loads(item.value_json)
    for item in removes:
        *parents, leaf = list(item.nested_key) or [item.key]
        node = target
        for p in parents:
            node = node.get(p, {})
        node.pop(leaf, None)


def _artifact(artifact) -> dict:
    files = {entry.path: entry.local_path for entry in artifact.manifest.contents}
    return {"name": artifact.name, "type": artifact.type, "files": files}
