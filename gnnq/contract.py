"""What the launcher, the ranks and the cluster agree on: file names in a run directory, the ranks' output
lines, environment variables and the cluster limits the config is checked against.

The launcher (gnnq.launch), the rank entry point (gnnq.rank) and the run record (gnnq.track) each
read these names from here, so neither side imports the other to talk to it. Constants only.
"""

from __future__ import annotations

# --- a run directory ---------------------------------------------------------------------------
CONFIG_FILE = "config.yaml"  # the launcher's resolved config; every rank reads it
METRICS_FILE = "metrics.jsonl"  # one row per epoch, written by rank 0
RECORD_FILE = "record.json"  # the run record, written by the launcher at the end
# the record's layout: a reader skips records of a newer one (gnnq-report names them); none written means 1
RECORD_SCHEMA_VERSION = 1
INTERNAL_DIR = ".gnnq"  # rank-to-launcher handoff files (result, errors, heartbeats)
RESULT_FILE = "result.json"  # rank 0's run summary, under INTERNAL_DIR
# present while `gnnq resume=<run dir>` runs the job again: the ranks load their checkpoints
RESUME_FILE = "resume.json"
ERROR_FILE = "error-rank{rank}.json"  # under INTERNAL_DIR: a failed rank's message and traceback
ERROR_FILES = "error-rank*.json"
HEARTBEAT_FILE = "heartbeat-rank{rank}.json"  # under INTERNAL_DIR: a rank's heartbeat (gnnq.rank.heartbeat)
HEARTBEAT_FILES = "heartbeat-rank*.json"
HEARTBEAT_INTERVAL_S = 1.0  # how often a rank rewrites its heartbeat
EXITS_FILE = "exits.json"  # under INTERNAL_DIR: the ranks that failed, in the order they ended (gnnq.launch.ranks)

# --- a run's epoch rows (metrics.jsonl), read by the report -------------------------------------------
# a validation metric reaches a target at ``val >= target - TARGET_SLACK`` (the ranks' early stop, the report's time to
# target): a mean over seeds of equal values may exceed each of them in its last bit
TARGET_SLACK = 1e-9

# --- the ranks' output, read by the launcher ------------------------------------------------------
PROGRESS_PREFIX = "@@gnnq-progress "  # rank 0's epoch row, as JSON after the prefix, one line each
RANK_WARNING_PREFIX = "[gnnq] warning:"  # how a rank's warnings start (e.g. gnnq.train.driver.check_loss)

# --- a warm pool's ranks (gnnq.rank.serve), read by the launcher (gnnq.launch.warm_pool) ---------------
WARM_RANK_MODULE = "gnnq.rank.serve"  # a pool's rank: joins the group once, then runs one run after another
WARM_READY = "@@gnnq-warm-ready"  # a pool's rank joined the group
WARM_DONE_PREFIX = "@@gnnq-warm-done "  # a pool's rank finished a run: {"ok": bool}

# --- environment the launcher sets for the ranks ---------------------------------------------------
STORE_FD_ENV = "GNNQ_STORE_FD"  # rank 0 of a local job: the listening socket its TCPStore serves on
LAUNCHER_PID_ENV = "GNNQ_LAUNCHER_PID"  # a local job's ranks: the launcher that started them (they die with it)
THREADS_ENV = "GNNQ_THREADS_PER_RANK"  # the launcher's thread count for the ranks of emulated hosts

# --- the cluster ---------------------------------------------------------------------------------
RANK_MODULE = "gnnq.rank"  # what torchrun starts on every rank: python -m gnnq.rank --run-dir D --parts P
EMULATED_MAX_HOSTS = 64  # cluster=emulated: hosts one machine's network namespaces emulate
LINK_PRESETS_MBIT = {"1gbit": 1_000.0, "10gbit": 10_000.0, "25gbit": 25_000.0}  # cluster.link presets

# sbatch options gnnq sets itself (as submitit spells them); cluster.sbatch_extra may not set them.
MANAGED_SBATCH_OPTIONS = {
    "nodes": "cluster.hosts",
    "ntasks": "cluster.hosts",
    "ntasks_per_node": "cluster.hosts",
    "gpus_per_node": "cluster.gpus_per_node",
    "gpus": "cluster.gpus_per_node",
    "cpus_per_task": "cluster.cpus_per_node",
    "partition": "cluster.partition",
    "account": "cluster.account",
    "time": "cluster.time_limit_min",
    "t": "cluster.time_limit_min",
    "array": "the sweep",
    "job_name": "the launcher",
    "output": "the launcher",
    "error": "the launcher",
    "signal": "the launcher",
}
