"""Resuming (docs/runs.md "Checkpoints and resuming"): an interrupted run continues to the end; what cannot be
continued (finished, no checkpoint, damaged checkpoint, other arguments, no run there) is refused with one
line, exit 2, and the earlier record left as it was."""

from __future__ import annotations

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import FAST, refused
from tests.reliability.context import Context

CHECKPOINTED = [*FAST, "trainer.epochs=4", "trainer.checkpoint_every=2"]


def _run(ctx: Context, args: list[str], env: dict | None = None, exit: int = 0) -> None:
    out = ctx.run(args, env)
    if out.proc.returncode != exit:
        raise RuntimeError(f"the earlier run ended {out.proc.returncode}, not {exit}: {out.last_line}")
    (ctx.state["run_dir"],) = ctx.run_dirs()


def interrupted(ctx: Context, every: int = 2) -> None:
    """A run that failed at epoch 3 (rank 1 raised), after the checkpoint of epoch 2 (with ``every`` = 2)."""
    _run(ctx, [*CHECKPOINTED, f"trainer.checkpoint_every={every}"], {"GNNQ_FAULT_INJECT": "rank=1,epoch=3"}, exit=1)


def _damaged(name: str, how):
    def setup(ctx: Context) -> None:
        interrupted(ctx)
        how(next((ctx.state["run_dir"] / "checkpoints").rglob(name)))

    return setup


def _flip(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _resume(ctx: Context) -> list[str]:
    return [f"resume={ctx.state['run_dir']}"]


def _resumed_to_the_end(ctx: Context, _: Outcome) -> list[str]:
    record = ctx.record(ctx.state["run_dir"])
    rows = (ctx.state["run_dir"] / "metrics.jsonl").read_text().splitlines()
    problems = (
        []
        if record.get("resumed_from_epoch") == 2
        else [f"resumed_from_epoch {record.get('resumed_from_epoch')}, expected 2"]
    )
    return problems + ([] if len(rows) == 4 else [f"{len(rows)} metrics rows, expected 4"])


CASES = [
    Case(
        "resume",
        "interrupted-run",
        "resume a run that failed after its epoch-2 checkpoint: it ends ok",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=_resume,
        setup=interrupted,
        verify=_resumed_to_the_end,
    ),
    Case(
        "resume",
        "finished-run",
        "resume a run that finished",
        refused(r"resume=.*nothing to resume"),
        args=_resume,
        setup=lambda ctx: _run(ctx, [*FAST, "trainer.checkpoint_every=1"]),
    ),
    Case(
        "resume",
        "no-checkpoint",
        "resume a failed run that saved no checkpoint",
        refused(r"no checkpoint to resume from.*trainer\.checkpoint_every=0"),
        args=_resume,
        setup=lambda ctx: interrupted(ctx, every=0),
    ),
    Case(
        "resume",
        "corrupted-checkpoint",
        "a rank file of the checkpoint with one byte changed",
        refused(r"rank1\.pt is corrupted.*sha256"),
        args=_resume,
        setup=_damaged("rank1.pt", _flip),
    ),
    Case(
        "resume",
        "missing-rank-file",
        "a rank file of the checkpoint deleted",
        refused(r"rank0\.pt"),
        args=_resume,
        setup=_damaged("rank0.pt", lambda p: p.unlink()),
    ),
    Case(
        "resume",
        "garbage-latest-json",
        "checkpoints/latest.json that is not JSON",
        refused(r"latest\.json"),
        args=_resume,
        setup=_damaged("latest.json", lambda p: p.write_text("{not json")),
    ),
    Case(
        "resume",
        "with-other-arguments",
        "resume=<dir> with an override",
        refused(r"takes nothing else.*trainer\.epochs=9"),
        args=lambda ctx: [*_resume(ctx), "trainer.epochs=9"],
        setup=interrupted,
    ),
    Case(
        "resume",
        "nowhere",
        "resume a directory that holds no run",
        refused(r"no config\.yaml there"),
        args=lambda ctx: [f"resume={ctx.root / 'nowhere'}"],
    ),
]


def _failed_twice(ctx: Context) -> None:
    """Attempt 1 fails at epoch 3 after the epoch-2 checkpoint; its resume fails at epoch 3 again (no newer one)."""
    interrupted(ctx)
    out = ctx.run(_resume(ctx), {"GNNQ_FAULT_INJECT": "rank=1,epoch=3"})
    if out.proc.returncode != 1:
        raise RuntimeError(f"the first resume ended {out.proc.returncode}, not 1: {out.last_line}")


def _every_attempts_log(ctx: Context, outcome: Outcome) -> list[str]:
    logs = ctx.state["run_dir"] / "logs"
    kept = sorted(p.name for p in logs.glob("torchrun*.log"))
    want = ["torchrun-until-epoch-2-2.log", "torchrun-until-epoch-2.log", "torchrun.log"]
    problems = [] if kept == want else [f"logs {kept}, expected {want}"]
    for name in want[:2]:  # both failed attempts' logs still hold their crash
        if (logs / name).is_file() and "injected fault" not in (logs / name).read_text(errors="replace"):
            problems.append(f"{name} does not hold its attempt's crash")
    return problems + _resumed_to_the_end(ctx, outcome)


CASES += [
    Case(
        "resume",
        "third-attempt-keeps-every-log",
        "a run that failed, was resumed and failed again, resumed once more (issue 31.14): all three logs kept",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=_resume,
        setup=_failed_twice,
        verify=_every_attempts_log,
    ),
]


# --- issue 45, cases 7-9: resume checks what it resumes ---


def _git(src, *args: str) -> str:
    import subprocess

    cmd = ["git", "-C", str(src), "-c", "user.name=gnnq", "-c", "user.email=gnnq@example.invalid", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _checkout_copy(ctx: Context) -> None:
    """gnnq's code as a git checkout of its own under the case (runs import it: PYTHONPATH), one commit."""
    import shutil
    from pathlib import Path

    import gnnq

    top, src = Path(gnnq.__file__).resolve().parents[1], ctx.root / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("gnnq", "conf", "sweeps"):
        shutil.copytree(top / name, src / name, ignore=skip)
    shutil.copy(top / "pyproject.toml", src / "pyproject.toml")
    (src / ".gitignore").write_text("__pycache__/\n")
    _git(src, "init", "-q")
    _git(src, "add", "-A")
    _git(src, "commit", "-qm", "the code of the first attempt")
    ctx.env["PYTHONPATH"] = str(src)
    ctx.state["src"] = src


def _new_commit_between(ctx: Context) -> None:
    _checkout_copy(ctx)
    interrupted(ctx)
    src = ctx.state["src"]
    ctx.state["commits"] = [_git(src, "rev-parse", "HEAD")]
    with open(src / "gnnq" / "__init__.py", "a") as f:
        f.write("# a change of the code between the attempts\n")
    _git(src, "commit", "-qam", "the code of the resumed attempt")
    ctx.state["commits"].append(_git(src, "rev-parse", "HEAD"))


def _both_commits(ctx: Context, outcome: Outcome) -> list[str]:
    old, new = ctx.state["commits"]
    problems = []
    if not any(old[:12] in w and new[:12] in w for w in outcome.warnings()):
        problems.append(f"no warning names both commits {old[:12]} and {new[:12]}")
    kept = [a.get("git_commit") for a in ctx.record(ctx.state["run_dir"]).get("attempts", [])]
    return problems + ([] if kept == [old, new] else [f"record attempts' git_commit {kept}, expected [old, new]"])


FILES = [a for a in CHECKPOINTED if not a.startswith("dataset.")]


def _interrupted_on_files(ctx: Context) -> None:
    """A dataset=files run that failed after its epoch-2 checkpoint; then its features get other values."""
    import numpy as np

    graph = ctx.graph()
    args = [*FILES, "dataset=files", f"dataset.path={graph}"]
    _run(ctx, args, {"GNNQ_FAULT_INJECT": "rank=1,epoch=3"}, exit=1)
    x = np.load(graph / "features.npy")
    np.save(graph / "features.npy", np.random.default_rng(1).standard_normal(x.shape).astype(x.dtype))


def _fingerprints_differ(ctx: Context, outcome: Outcome) -> list[str]:
    prints = [a.get("dataset_fingerprint") for a in ctx.record(ctx.state["run_dir"]).get("attempts", [])]
    ok = len(prints) == 2 and all(prints) and prints[0] != prints[1]
    return ([] if ok else [f"attempts' dataset_fingerprint {prints}, expected two different"]) + _resumed_to_the_end(
        ctx, outcome
    )


def _every_attempts_output(ctx: Context, outcome: Outcome) -> list[str]:
    log = (ctx.state["run_dir"] / "cli.log").read_text(errors="replace")
    want = {
        "the first attempt's run dir line": "[gnnq] run dir:",
        "the first attempt's error": "injected fault",
        "the resumed attempt's header": "=== gnnq resume=",
        "the resumed attempt's output": "resuming from the checkpoint of epoch 2",
        "the resumed attempt's summary": "best val",
    }
    return [f"cli.log lacks {what} ({text!r})" for what, text in want.items() if text not in log]


CASES += [
    Case(
        "resume",
        "after-new-commit",
        "resume after a new commit of the code (issue 45.7): a warning naming both commits, both in the record",
        Expect(
            exit=0,
            records=("ok",),
            replaces_records=True,
            warning=r"resume=.*the code changed .* commit [0-9a-f]{12}, this attempt runs at [0-9a-f]{12}",
        ),
        args=_resume,
        setup=_new_commit_between,
        verify=_both_commits,
    ),
    Case(
        "resume",
        "changed-data",
        "resume after the dataset's features got other values, same shape (issue 45.8): refused, both fingerprints",
        refused(
            r"resume=.*: dataset \S+ changed .*fingerprint was [0-9a-f]{32}, it is [0-9a-f]{32} now.*"
            r"allow_changed_data=true"
        ),
        args=_resume,
        setup=_interrupted_on_files,
    ),
    Case(
        "resume",
        "changed-data-allowed",
        "the same with allow_changed_data=true (issue 45.8): resumed with a warning, both fingerprints kept",
        Expect(
            exit=0,
            records=("ok",),
            replaces_records=True,
            warning=r"dataset \S+ changed .*fingerprint [0-9a-f]{32} -> [0-9a-f]{32}.*allow_changed_data=true",
        ),
        args=lambda ctx: [*_resume(ctx), "allow_changed_data=true"],
        setup=_interrupted_on_files,
        verify=_fingerprints_differ,
    ),
    Case(
        "resume",
        "terminal-output-kept",
        "the resumed attempt's terminal output (issue 45.9): appended to cli.log after the first attempt's",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=_resume,
        setup=interrupted,
        verify=_every_attempts_output,
    ),
]
