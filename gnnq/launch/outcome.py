"""Runs of this gnnq invocation that failed; gnnq exits non-zero if any did.

Shared by the command line (runs on this machine) and the Slurm launcher (runs it waited for).
"""

RUNS: list[str] = []  # every run, failed or not
FAILED_RUNS: list[str] = []  # among them
REFUSED_RUNS: list[str] = []  # among those: their run dir was not free (gnnq.launch.run_dir)
SKIPPED_RUNS: list[str] = []  # sweep points done in an earlier attempt of the sweep (gnnq.launch.sweep_state)
SWEEP_DIR: list[str] = []  # the sweep's directory (hydra.sweep.dir), set when a multirun starts
