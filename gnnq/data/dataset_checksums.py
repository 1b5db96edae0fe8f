"""sha256 checks of the files a dataset loader reads and writes, so that a corrupted one is never used silently.

Each dataset folder under the data root (``Cora/``, ``ogbn_arxiv/``) gets a sidecar, ``gnnq_sha256.json``,
beside its raw files and processed cache. It holds the sha256 of

* the raw files, checked whenever they are about to be read (a valid processed cache means they are not
  read, so they are not hashed either). The expected hashes come from gnnq's manifest of the published
  files (:mod:`gnnq.data.raw_manifest`) where it lists the dataset, else from this sidecar, which records
  them the first time the files are read here (trust on first use);
* the processed cache (PyG's ``processed/``, gnnq's OGB arrays), checked before every load: a cache
  without recorded hashes, or that fails them, is rebuilt from the raw files with a one-line warning.

The sidecar carries the sha256 of its own content; a damaged one is ignored with a warning, so the
processed cache is rebuilt and raw files outside the manifest are trusted anew.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from gnnq.data.integrity import check_sha256, file_sha256, warn
from gnnq.data.raw_manifest import PUBLISHED_SHA256
from gnnq.errors import CacheError, DatasetError
from gnnq.track.files import write_text_atomic

SIDECAR = "gnnq_sha256.json"
FORMAT_VERSION = 1
MANIFEST = "gnnq's manifest of the published file"


@dataclass(frozen=True)
class Mismatch:
    name: str  # relative to the dataset folder
    path: Path
    expected: str
    actual: str
    source: str  # where ``expected`` comes from


class CorruptRawFiles(DatasetError):
    """Raw files whose sha256 differs from the expected one; the one-line message names the first."""

    def __init__(self, dataset: str, mismatches: list[Mismatch], sums: dict[str, str], downloaded: bool, sidecar: Path):
        self.mismatches = mismatches
        self.sums = sums  # every file checked: {name: actual sha256}
        first = mismatches[0]
        others = [m.path.name for m in mismatches[1:]]
        more = f" (so do {', '.join(others)})" if others else ""
        if downloaded:
            state = "was downloaded again, but"
            todo = (
                "the download is damaged or the published file changed: try again later, or put an intact copy "
                "there by hand"
            )
        else:
            state = "is corrupt:"
            todo = (
                "run again with dataset.download=true to replace it with a fresh download, or put an intact copy "
                "there by hand"
            )
        if first.source != MANIFEST:
            todo += f"; if you replaced it on purpose, delete {sidecar} to trust the new file"
        super().__init__(
            f"{dataset}: {first.path} {state} its sha256 {first.actual} differs from the expected {first.expected} "
            f"({first.source}){more}; {todo}"
        )


class DatasetChecksums:
    """The expected sha256 of one dataset folder's raw files and processed cache, and its sidecar."""

    def __init__(self, dataset: str, directory: Path):
        self.dataset = dataset
        self.directory = Path(directory)
        self.path = self.directory / SIDECAR
        self._published = PUBLISHED_SHA256.get(dataset, {})
        self._raw, self._processed = self._read()

    def check_raw(self, names: Iterable[str], downloaded: bool = False) -> dict[str, str]:
        """{name: sha256} of the raw files ``names`` (relative to the folder); CorruptRawFiles if any differs
        from its expected hash. ``downloaded``: they were just downloaded (says so in the error)."""
        sums, bad = {}, []
        for name in names:
            sums[name] = actual = file_sha256(self.directory / name)
            expected, source = self._expected_raw(name)
            if expected is not None and actual != expected:
                bad.append(Mismatch(name, self.directory / name, expected, actual, source))
        if bad:
            raise CorruptRawFiles(self.dataset, bad, sums, downloaded, self.path)
        return sums

    def cache_intact(self, names: Iterable[str]) -> bool:
        """Whether the processed cache ``names`` is exactly the recorded files, each with its recorded sha256.
        When it is not, warns (naming the file) that the cache is rebuilt."""
        names = sorted(names)
        problem = None
        if not self._processed:
            problem = f"no sha256 of it is recorded in {self.path}"
        elif names != sorted(self._processed):
            problem = (
                f"it holds {', '.join(names) or 'no files'}, but {self.path} records "
                f"{', '.join(sorted(self._processed))}"
            )
        else:
            for name in names:
                try:
                    check_sha256(self.directory / name, self._processed[name], self.path)
                except CacheError as exc:
                    problem = str(exc)
                    break
        if problem is not None:
            warn(f"rebuilding the processed cache of {self.dataset} in {self.directory}: {problem}")
        return problem is None

    def record(self, raw: dict[str, str], processed_names: Iterable[str]) -> None:
        """Write the sidecar: ``raw`` (checked hashes) added to the recorded ones, the processed cache hashed now."""
        body = {
            "format": FORMAT_VERSION,
            "dataset": self.dataset,
            "raw": {**self._raw, **raw},
            "processed": {name: file_sha256(self.directory / name) for name in processed_names},
        }
        body["sha256"] = _digest(body)
        write_text_atomic(self.path, json.dumps(body, indent=1, sort_keys=True) + "\n")
        self._raw, self._processed = body["raw"], body["processed"]

    def _expected_raw(self, name: str) -> tuple[str | None, str]:
        if name in self._published:
            return self._published[name], MANIFEST
        return self._raw.get(name), f"recorded in {self.path} when the file was first read"

    def _read(self) -> tuple[dict[str, str], dict[str, str]]:
        if not self.path.exists():
            return {}, {}
        try:
            body = json.loads(self.path.read_text())
            if not isinstance(body, dict) or body.get("sha256") != _digest(body):
                raise ValueError("its content does not match the checksum it carries")
            if body.get("format") != FORMAT_VERSION:
                raise ValueError(f"format {body.get('format')} is not {FORMAT_VERSION}")
            return dict(body["raw"]), dict(body["processed"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warn(f"ignoring {self.path}, it is damaged ({exc}); the checksums it held are recorded anew")
            return {}, {}


def discard_corrupt(exc: CorruptRawFiles) -> dict[str, str]:
    """Delete the corrupt raw files of ``exc`` so that they are downloaded again (a warning each);
    returns the hashes of the files that passed."""
    for m in exc.mismatches:
        warn(
            f"{m.path} is corrupt (sha256 {m.actual[:16]}..., expected {m.expected[:16]}...): deleting it to "
            "download it again"
        )
        m.path.unlink(missing_ok=True)
    bad = {m.name for m in exc.mismatches}
    return {name: sha for name, sha in exc.sums.items() if name not in bad}


def files_under(directory: Path, sub: str) -> list[str]:
    """The regular files in ``directory / sub``, as names relative to ``directory``."""
    return sorted(f"{sub}/{p.name}" for p in (Path(directory) / sub).iterdir() if p.is_file())


def _digest(body: dict) -> str:
    content = {k: v for k, v in body.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
