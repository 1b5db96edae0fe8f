"""A case's own place: a temporary root with runs/, data/ and a home, the environment of its gnnq commands
(planted W&B key, process marker, everything W&B and Python write pointed below the root), and ways to run
gnnq to the end or in the background."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.reliability.case import Outcome
from tests.reliability.procs import MARKER_ENV

# Environment of the calling shell that would change what a case's gnnq does.
DROPPED_ENV = ("GNNQ_FAULT_INJECT", "GNNQ_RUNS", "GNNQ_DATA", "WANDB_API_KEY", "GLOO_SOCKET_IFNAME")


def _kernel_cache() -> str:
    from gnnq.comm.kernels.c_codec import cache_root

    return os.environ.get("GNNQ_KERNEL_CACHE") or str(cache_root())


class Context:
    """Directories, environment and runners of one case; ``close()`` undoes its mounts and removes its root."""

    def __init__(self, parent: Path, case_id: str):
        self.marker = secrets.token_hex(8)
        self.secret = f"gnnq-reliability-fake-key-{secrets.token_hex(16)}"
        self.root = parent / case_id.replace("/", "-")
        self.runs, self.data, self.home = self.root / "runs", self.root / "data", self.root / "home"
        for d in (self.runs, self.data, self.home / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self.cleanups = contextlib.ExitStack()
        self.state: dict = {}  # what a case's setup hands to its act and verify
        kept = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        self.env = {
            **kept,
            "GNNQ_RUNS": str(self.runs),
            "GNNQ_DATA": str(self.data),
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "WANDB_API_KEY": self.secret,
            MARKER_ENV: self.marker,
            "GNNQ_KERNEL_CACHE": _kernel_cache(),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "TMPDIR": str(self.home / "tmp"),
            "WANDB_DIR": str(self.home / "wandb"),
            "WANDB_CONFIG_DIR": str(self.home / ".config" / "wandb"),
            "WANDB_CACHE_DIR": str(self.home / ".cache" / "wandb"),
            "WANDB_DATA_DIR": str(self.home / "wandb-data"),
        }

    # --- running gnnq ---------------------------------------------------------------------------------

    def _env(self, env: dict | None) -> dict:
        return {**self.env, **(env or {})}

    def start(
        self, args: list[str], env: dict | None = None, program: str = "gnnq", prefix: list[str] = ()
    ) -> subprocess.Popen:
        """``program ARGS`` in the background (``prefix``: a wrapper such as setpriv before it)."""
        cmd = [*prefix, *command(program), *args]
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self._env(env), cwd=self.root
        )

    def run(self, args: list[str], env: dict | None = None, timeout_s: float = 300, program: str = "gnnq") -> Outcome:
        """``program ARGS`` (gnnq unless told) to its end; past ``timeout_s`` it is killed and the outcome says so."""
        proc = self.start(args, env, program)
        return finish(proc, timeout_s)

    def wait_for_training(self, proc: subprocess.Popen, under: Path | None = None, timeout_s: float = 180) -> Path:
        """The run dir below ``under`` (default runs/) once rank 0 has written a row of metrics.jsonl."""
        under = under or self.runs
        deadline = time.monotonic() + timeout_s
        while True:
            rows = [p for p in under.rglob("metrics.jsonl") if p.stat().st_size] if under.exists() else []
            if rows:
                return rows[0].parent
            if proc.poll() is not None:
                raise RuntimeError(
                    f"gnnq exited ({proc.returncode}) before training started: {proc.stderr.read()[-500:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"training did not start within {timeout_s:.0f} s")
            time.sleep(0.2)

    # --- files -----------------------------------------------------------------------------------------

    def graph(self, name: str = "graph", **kwargs) -> Path:
        from tests.reliability.files_graph import write_files_graph

        d = self.root / name
        write_files_graph(d, **kwargs)
        return d

    def mount(self, target: Path, *how: list[str]) -> Path:
        """``target`` with the mounts ``how`` (mount argument lists, in order), undone by ``close()``."""
        target.mkdir(parents=True, exist_ok=True)
        for args in how:
            res = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
            if res.returncode != 0:
                raise PermissionError(f"cannot mount here (needs root): {res.stderr.strip()}")
            if not any("remount" in a for a in args):
                self.cleanups.callback(subprocess.run, ["umount", "-l", str(target)], capture_output=True)
        return target

    def read_only_view(self, source: Path, target: Path) -> Path:
        """``source`` seen read-only at ``target`` (a read-only bind mount: refused even to root)."""
        return self.mount(target, ["--bind", str(source)], ["-o", "remount,bind,ro"])

    def run_dirs(self, under: Path | None = None) -> list[Path]:
        under = under or self.runs
        return sorted(p.parent for p in under.rglob("config.yaml") if p.parent.name != ".hydra")

    def record(self, run_dir: Path) -> dict:
        return json.loads((run_dir / "record.json").read_text())

    def close(self, keep: bool = False) -> None:
        self.cleanups.close()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


def command(program: str) -> list[str]:
    """How a case starts ``program``: gnnq as ``python -m gnnq.cli``, the others by their installed scripts."""
    if program == "gnnq":
        return [sys.executable, "-m", "gnnq.cli"]
    return [str(Path(sys.executable).parent / program)]


def finish(proc: subprocess.Popen, timeout_s: float) -> Outcome:
    """Wait for ``proc``; kill it past ``timeout_s`` (the outcome then says it hung)."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return Outcome(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Outcome(
            subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
            [f"still running after {timeout_s:.0f} s: killed"],
        )
