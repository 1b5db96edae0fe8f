"""Bad places (docs/runs.md "The run directory"): a run dir that already holds a run is refused unless
overwrite=true, a sweep dir that holds a finished sweep resumes it (nothing rerun); a runs root that is a file or
read-only is named; a read-only data root with complete
files is read; a full disk at a checkpoint keeps the previous one. Real files and real mounts (root only)."""

from __future__ import annotations

import json
import re
import time

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import ENDLESS, FAST, OK, failed, refused
from tests.reliability.context import Context, finish


def _fixed(ctx: Context) -> list[str]:
    return [*FAST, f"hydra.run.dir={ctx.runs / 'fixed'}"]


def _earlier_fixed_run(ctx: Context) -> None:
    out = ctx.run(_fixed(ctx))
    if out.proc.returncode != 0:
        raise RuntimeError(f"the earlier run failed: {out.last_line}")


def _sweep(ctx: Context) -> list[str]:
    return ["-m", *FAST, f"hydra.sweep.dir={ctx.runs / 'sweep'}", "trainer.seed=0"]


def _earlier_sweep(ctx: Context) -> None:
    if ctx.run(_sweep(ctx)).proc.returncode != 0:
        raise RuntimeError("the earlier sweep failed")


def _blocker(ctx: Context) -> None:
    (ctx.root / "a-file").write_text("keep me\n")


def _read_only_root(ctx: Context) -> None:
    (ctx.root / "src").mkdir()
    ctx.read_only_view(ctx.root / "src", ctx.root / "ro")


def _read_only_complete_data(ctx: Context) -> None:
    """An earlier run built the graph's parts in data/; the case reads data/ through a read-only view."""
    if ctx.run(FAST).proc.returncode != 0:
        raise RuntimeError("the earlier run failed")
    ctx.read_only_view(ctx.data, ctx.root / "ro-data")


def _small_disk(ctx: Context) -> None:
    ctx.mount(ctx.root / "small", ["-t", "tmpfs", "-o", "size=1m", "tmpfs"])


def _kept_blocker(ctx: Context, _) -> list[str]:
    return [] if (ctx.root / "a-file").read_text() == "keep me\n" else ["the file in the way was changed"]


def _ro_env(ctx: Context) -> dict:
    return {"GNNQ_RUNS": str(ctx.root / "ro" / "runs")}


def _checkpoint_kept(ctx: Context, _) -> list[str]:
    kept = sorted(p.name for p in (ctx.root / "small" / "run" / "checkpoints").iterdir())
    return [] if kept == ["epoch-000002", "latest.json"] else [f"checkpoints left: {kept}"]


CASES = [
    Case(
        "places",
        "reused-run-dir",
        "a run dir holding a record is refused and kept",
        refused(r"hydra\.run\.dir: .*fixed already holds a run \(record\.json exists\).*overwrite=true"),
        args=_fixed,
        setup=_earlier_fixed_run,
    ),
    Case(
        "places",
        "overwrite-run-dir",
        "overwrite=true replaces the run in it",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=lambda ctx: [*_fixed(ctx), "overwrite=true"],
        setup=_earlier_fixed_run,
    ),
    Case(
        "places",
        "resumed-sweep-dir",
        "a sweep dir holding a finished sweep resumes it: its ok point is skipped, kept as it was",
        Expect(exit=0),
        args=_sweep,
        setup=_earlier_sweep,
    ),
    Case(
        "places",
        "runs-root-below-a-file",
        "GNNQ_RUNS below a file",
        refused(r"GNNQ_RUNS: .*a-file is a file, not a directory"),
        args=FAST,
        setup=lambda ctx: (_blocker(ctx), ctx.env.update(GNNQ_RUNS=str(ctx.root / "a-file" / "runs"))),
        verify=_kept_blocker,
    ),
    Case(
        "places",
        "runs-root-is-a-file",
        "runs_root= a file",
        refused(r"runs_root: .*a-file is a file, not a directory"),
        args=lambda ctx: [*FAST, f"runs_root={ctx.root / 'a-file'}"],
        setup=_blocker,
        verify=_kept_blocker,
    ),
    Case(
        "places",
        "read-only-runs-root",
        "GNNQ_RUNS on a read-only filesystem",
        refused(r"GNNQ_RUNS: cannot create directories in .*ro \(Read-only file system \(EROFS\)\)"),
        args=FAST,
        setup=lambda ctx: (_read_only_root(ctx), ctx.env.update(_ro_env(ctx))),
    ),
    Case(
        "places",
        "read-only-run-dir",
        "hydra.run.dir on a read-only filesystem",
        refused(r"hydra\.run\.dir: .*Read-only file system"),
        args=lambda ctx: [*FAST, f"hydra.run.dir={ctx.root / 'ro' / 'run'}"],
        setup=_read_only_root,
    ),
    Case(
        "places",
        "read-only-data-complete",
        "a read-only data root whose graph and parts are complete is read",
        OK,
        args=FAST,
        setup=lambda ctx: (_read_only_complete_data(ctx), ctx.env.update(GNNQ_DATA=str(ctx.root / "ro-data"))),
    ),
    Case(
        "places",
        "read-only-data-empty",
        "a read-only data root that lacks the parts: one line naming it",
        failed(r"(GNNQ_DATA|dataset\.root): .*ro.*\(Read-only file system \(EROFS\)\)"),
        args=FAST,
        setup=lambda ctx: (_read_only_root(ctx), ctx.env.update(GNNQ_DATA=str(ctx.root / "ro"))),
    ),
    Case(
        "places",
        "data-root-is-a-file",
        "GNNQ_DATA is a file",
        failed(r"(GNNQ_DATA|dataset\.root): .*a-file is a file, not a directory"),
        args=FAST,
        setup=lambda ctx: (_blocker(ctx), ctx.env.update(GNNQ_DATA=str(ctx.root / "a-file"))),
        verify=_kept_blocker,
    ),
    Case(
        "places",
        "disk-full-at-checkpoint",
        "1 MiB tmpfs: the epoch-4 checkpoint does not fit, epoch 2's stays",
        failed(
            r"checkpoint of epoch 4 not written: No space left on device \(ENOSPC\).*the checkpoint of epoch 2 "
            r"is intact"
        ),
        args=lambda ctx: [
            "logger=none",
            "dataset.num_nodes=1500",
            "model.hidden=128",
            "trainer.epochs=6",
            "trainer.checkpoint_every=2",
            f"hydra.run.dir={ctx.root / 'small' / 'run'}",
        ],
        setup=_small_disk,
        verify=_checkpoint_kept,
    ),
]


# --- issue 31, item 8: names too long, a full runs root, a ~ in GNNQ_RUNS ---

LONG_NAME = "x" * 300  # over the 255 bytes of a name that ext4, tmpfs, xfs and btrfs take


def _tree(ctx: Context) -> list[str]:
    """Every path below the case's root but its home (W&B, Python caches), to tell that nothing was written."""
    return sorted(str(p.relative_to(ctx.root)) for p in ctx.root.rglob("*") if ctx.home not in p.parents)


def _snapshot(ctx: Context) -> None:
    ctx.state["tree"] = _tree(ctx)


def _nothing_written(ctx: Context, _) -> list[str]:
    new = sorted(set(_tree(ctx)) - set(ctx.state["tree"]))
    return [f"written: {new[:5]}"] if new else []


def _full_runs_root(ctx: Context) -> None:
    """A 64 KiB tmpfs filled to the last byte (directories still fit on tmpfs; a file's first byte does not)."""
    full = ctx.mount(ctx.root / "full", ["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
    with open(full / "fill", "wb", buffering=0) as f:  # unbuffered: nothing left to fail at close
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    ctx.env["GNNQ_RUNS"] = str(full / "runs")
    _snapshot(ctx)


def _tilde_runs(ctx: Context) -> None:
    ctx.env["GNNQ_RUNS"] = "~/runs"


def _tilde_expanded(ctx: Context, _) -> list[str]:
    problems = [] if ctx.run_dirs(ctx.home / "runs") else [f"no run under {ctx.home / 'runs'} ($HOME/runs)"]
    return problems + ([f"a directory named ~ in {ctx.root}"] if (ctx.root / "~").exists() else [])


CASES += [
    Case(
        "places",
        "run-dir-name-too-long",
        "hydra.run.dir with a 300-byte name (issue 31.8): ENAMETOOLONG named, nothing written",
        refused(
            r"hydra\.run\.dir: .*x{300} cannot be created \(File name too long \(ENAMETOOLONG\): a name of 300 bytes"
        ),
        args=lambda ctx: [*FAST, f"hydra.run.dir={ctx.runs / LONG_NAME}"],
        setup=_snapshot,
        verify=_nothing_written,
    ),
    Case(
        "places",
        "runs-root-full",
        "GNNQ_RUNS on a full filesystem (issue 31.8): ENOSPC named, nothing left there",
        refused(r"GNNQ_RUNS: cannot write .*full/runs/.*lock \(No space left on device \(ENOSPC\)\)"),
        args=FAST,
        setup=_full_runs_root,
        verify=_nothing_written,
    ),
    Case(
        "places",
        "runs-root-tilde",
        "GNNQ_RUNS='~/runs' (issue 31.8): expanded to $HOME/runs, no directory named ~",
        OK,
        args=FAST,
        setup=_tilde_runs,
        verify=_tilde_expanded,
    ),
]


# --- issue 45, cases 10-12: a run that fails on its disk still leaves its record ---


def _fill(target) -> None:
    """Write zeros into ``target`` until its filesystem is full."""
    with open(target / "fill", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass


def _fills_during_training(ctx: Context, args: list[str]) -> Outcome:
    disk = ctx.mount(ctx.root / "disk", ["-t", "tmpfs", "-o", "size=48m", "tmpfs"])
    ctx.env["GNNQ_RUNS"] = str(disk / "runs")
    proc = ctx.start(args)
    try:
        ctx.wait_for_training(proc, under=disk)
    except RuntimeError as exc:
        return Outcome(finish(proc, 60).proc, [str(exc)])
    _fill(disk)
    return finish(proc, 180)


def _disk_behind_a_bind(ctx: Context) -> None:
    """A 64 MiB tmpfs, seen at disk/ through a bind mount (so that a read-only view can later cover it)."""
    ctx.mount(ctx.root / "disk-src", ["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
    ctx.mount(ctx.root / "disk", ["--bind", str(ctx.root / "disk-src")])


def _read_only_after_epoch_8(ctx: Context, args: list[str]) -> Outcome:
    """hydra.run.dir turns read-only once the checkpoint of epoch 8 (or a later one) is there: a read-only view of
    its filesystem mounted over it (Linux refuses ``remount,ro`` of a filesystem with files open for writing, as
    the launcher's log is; what the run opens from then on is refused with EROFS)."""
    disk = ctx.root / "disk"
    proc = ctx.start(args)
    try:
        latest, deadline = disk / "run" / "checkpoints" / "latest.json", time.monotonic() + 180
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                epoch = json.loads(latest.read_text())["epoch"]
            except (OSError, ValueError, KeyError):
                epoch = 0
            if epoch >= 8:
                ctx.read_only_view(ctx.root / "disk-src", disk)
                ctx.state["remounted_after"] = epoch
                break
            time.sleep(0.02)
        else:
            return Outcome(finish(proc, 60).proc, ["the checkpoint of epoch 8 never came"])
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return finish(proc, 180)


def _no_partial_handoffs(ctx: Context, _) -> list[str]:
    left = [str(p) for p in ctx.root.rglob(".gnnq/.*") if p.name.endswith(".tmp")]
    return [f"temporary files left: {left}"] if left else []


def _intact_named(ctx: Context, outcome: Outcome) -> list[str]:
    m = re.search(r"checkpoint of epoch (\d+) is intact", outcome.last_line)
    if not m:
        return []  # the line's own check says so
    named, run = int(m.group(1)), ctx.root / "disk-src" / "run"
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())["epoch"]
    problems = [] if named == latest else [f"the line names epoch {named}, latest.json says {latest}"]
    if named < 8:
        problems.append(f"the checkpoint named is of epoch {named}, before the remount after epoch 8")
    return problems


CASES += [
    Case(
        "places",
        "runs-root-fills-during-training",
        "GNNQ_RUNS on a 48 MiB tmpfs filled during training, logger=wandb, no checkpoints (issue 45.10)",
        failed(r"disk/runs/\S+.*\(No space left on device \(ENOSPC\)\).*no checkpoint was written"),
        args=["logger=wandb", "dataset.num_nodes=600", "model.hidden=16", "trainer.epochs=100000"],
        act=_fills_during_training,
        verify=_no_partial_handoffs,
    ),
    Case(
        "places",
        "run-dir-read-only-mid-run",
        "the run dir remounted read-only after epoch 8, checkpoints every 4 (issue 45.11): EROFS, intact checkpoint",
        failed(
            r"Read-only file system \(EROFS\).*checkpoint of epoch \d+ is intact.*record\.json could not be "
            r"written, the record is at \S+/record\.json"
        ),
        args=lambda ctx: [*ENDLESS, "trainer.checkpoint_every=4", f"hydra.run.dir={ctx.root / 'disk' / 'run'}"],
        setup=_disk_behind_a_bind,
        act=_read_only_after_epoch_8,
        verify=_intact_named,
    ),
    Case(
        "places",
        "runs-root-too-small",
        "GNNQ_RUNS on a 16 KiB tmpfs from the start (issue 45.12): exit 2, what it made removed",
        refused(r"GNNQ_RUNS: cannot write .*tiny/runs/.* \(No space left on device \(ENOSPC\)\)"),
        args=FAST,
        setup=lambda ctx: (
            ctx.mount(ctx.root / "tiny", ["-t", "tmpfs", "-o", "size=16k", "tmpfs"]),
            ctx.env.update(GNNQ_RUNS=str(ctx.root / "tiny" / "runs")),
            _snapshot(ctx),
        ),
        verify=_nothing_written,
    ),
]
