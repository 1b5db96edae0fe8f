"""One experiment: resolved config → data and parts → torchrun → run record."""

from __future__ import annotations

import errno
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from gnnq.config.dataset_name import FILES, graph_name
from gnnq.contract import CONFIG_FILE, INTERNAL_DIR, RECORD_FILE, RESULT_FILE, RESUME_FILE
from gnnq.data.integrity import warn
from gnnq.data.part_cache import cached_parts, prepare_parts
from gnnq.data.registry import data_root, data_root_key, dataset_sources, load_dataset
from gnnq.data.summary import GraphSummary, read_summary, recipe, write_summary
from gnnq.errors import CacheError, ConfigError, GnnqError, LaunchError, describe_os_error
from gnnq.launch import interrupts, warm_pool
from gnnq.launch.disk_failure import DISK_ERRNOS, disk_failure_line, write_failed_record, written_elsewhere
from gnnq.launch.emulated import run_emulated
from gnnq.launch.failure import describe_failure
from gnnq.launch.partition_memory import check_before_partitioning, graph_mib
from gnnq.launch.placement import place
from gnnq.launch.ranks import run_local_ranks
from gnnq.launch.resources import check_launch_resources, method_resources
from gnnq.launch.resume_checks import check_resume, earlier_record
from gnnq.launch.run_dir import check_writable, claim_run_dir, clear_earlier_attempt, release_run_dir
from gnnq.launch.torchrun import run_torchrun
from gnnq.track.files import write_json_atomic, write_text_atomic
from gnnq.track.progress import ProgressLine, summary_table
from gnnq.track.record import build_record
from gnnq.track.wandb_logger import NullLogger, close_logger, make_logger

DISK_ERRNO_NAMES = [errno.errorcode[e] for e in DISK_ERRNOS]


def say(msg: str) -> None:
    print(f"[gnnq] {msg}", flush=True)


def run_job(cfg: DictConfig, run_dir: Path, extra: dict | None = None) -> dict:
    """Run one experiment in ``run_dir``; always leaves a complete record.json and returns it.

    PlaceError (nothing written) when ``run_dir`` is not free: see gnnq.launch.run_dir.claim_run_dir."""
    run_dir = claim_run_dir(run_dir, overwrite=bool(cfg.get("overwrite", False)))
    try:
        return _run_claimed(cfg, run_dir, extra)
    finally:
        release_run_dir(run_dir)  # a sweep's finished points are free again at once


def _run_claimed(cfg: DictConfig, run_dir: Path, extra: dict | None) -> dict:
    config = OmegaConf.to_container(cfg, resolve=True)
    write_text_atomic(run_dir / CONFIG_FILE, OmegaConf.to_yaml(config))
    say(f"run dir: {run_dir}")
    if cfg.quantizer.name == "adaptive" and OmegaConf.is_interpolation(cfg.quantizer, "assign_cycle"):
        say(
            f"quantizer.assign_cycle={config['quantizer']['assign_cycle']}: the default, a quarter of "
            f"trainer.epochs={cfg.trainer.epochs} (AdaQP's 4 assignments per run); set quantizer.assign_cycle to fix it"
        )
    extra = {"run_dir": str(run_dir), **(extra or {})}
    started = time.time()
    logger = NullLogger()
    try:
        logger = make_logger(cfg, run_dir, resume=(run_dir / INTERNAL_DIR / RESUME_FILE).is_file())
        parts_dir, meta = prepare_data(cfg)
        if "dataset_fingerprint" in meta:  # a files graph: reports tell graphs apart by it (gnnq.config.dataset_name)
            extra["dataset_fingerprint"] = meta.pop("dataset_fingerprint")
        extra["partition"] = meta
        summary = launch(cfg, run_dir, parts_dir, logger.log_epoch)
        record = build_record(config, "ok", summary, extra=extra)
    except KeyboardInterrupt as exc:
        _interrupted(run_dir, config, extra, logger, started, interrupts.received() or str(exc) or "SIGINT")
        raise
    except Exception as exc:  # noqa: BLE001 - an unexpected bug still leaves a failed record
        if interrupts.received():  # the signal surfaced as another error (METIS' C++ turns it into a RuntimeError)
            _interrupted(run_dir, config, extra, logger, started, interrupts.received())
            raise KeyboardInterrupt(interrupts.received()) from None
        record = build_record(config, "failed", error=_failure_line(exc, run_dir), extra=extra)
    conclude(run_dir, record, logger, started)
    if record["status"] == "ok":
        print(summary_table(record), flush=True)
    else:
        print(f"gnnq: error: {record['error']}", file=sys.stderr, flush=True)
    return record


def _failure_line(exc: Exception, run_dir: Path) -> str:
    """A GnnqError's own line; a run dir that stopped taking writes (full, read-only) named with its errno
    (gnnq.launch.disk_failure); any other exception (a bug) with its traceback kept in logs/launcher.log."""
    if isinstance(exc, GnnqError) and any(f"({name})" in str(exc) for name in DISK_ERRNO_NAMES):
        return str(exc)  # it names the disk's problem itself (a checkpoint that did not fit)
    disk = disk_failure_line(run_dir, exc)
    if disk:
        return disk
    if isinstance(exc, GnnqError):
        return str(exc)
    try:
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / "logs" / "launcher.log").write_text(traceback.format_exc())
    except OSError:
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc} (traceback: {run_dir}/logs/launcher.log)"


def _interrupted(run_dir: Path, config: dict, extra: dict, logger, started: float, reason: str) -> None:
    """The failed record of a run a signal stopped (the ranks are stopped by then)."""
    record = build_record(config, "failed", error=f"interrupted ({reason}); all ranks were stopped", extra=extra)
    try:
        conclude(run_dir, record, logger, started)
    except GnnqError as lost:  # the interrupt still decides the exit code (128 + signal)
        print(f"gnnq: error: {lost}", file=sys.stderr, flush=True)


def conclude(run_dir: Path, record: dict, logger: NullLogger, started: float) -> None:
    """Write record.json, then give W&B the same numbers (its summary is the record's)."""
    record["wall_time_s"] = round(time.time() - started, 3)
    try:
        _write_final_record(run_dir, record)
    finally:
        close_logger(logger, record, run_dir)


def _write_final_record(run_dir: Path, record: dict) -> None:
    """write_record; a filesystem that refuses it (full, read-only by now) gets it after the room kept for it is
    freed, else it goes elsewhere (gnnq.launch.disk_failure); either way one LaunchError line says where it is."""
    what = f"the run {'failed: ' + record['error'] if record['error'] else 'finished'}"
    try:
        path = write_failed_record(run_dir, record)
    except OSError as exc:
        raise LaunchError(f"cannot write {run_dir / RECORD_FILE} ({describe_os_error(exc)}); {what}") from None
    if path.parent != run_dir:
        raise LaunchError(f"{what}{written_elsewhere(run_dir, path)}")


def resume_job(run_dir: Path, allow_changed_data: bool = False) -> dict:
    """Continue the run in ``run_dir`` from its latest checkpoint, with its saved config; returns the new record.

    New code since the earlier attempt is a warning; changed data is refused unless ``allow_changed_data``
    (gnnq.launch.resume_checks)."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(f"resume={run_dir}: no {CONFIG_FILE} there; give the directory of a gnnq run")
    claim_run_dir(run_dir, "resume", resuming=True)  # not while another gnnq runs in it
    from gnnq.train.checkpoint import verify_checkpoint  # here: a new run's launcher does not import torch

    latest = verify_checkpoint(run_dir)  # every rank's file, before anything starts
    previous = run_dir / RECORD_FILE
    if previous.is_file() and json.loads(previous.read_text()).get("status") == "ok":
        raise ConfigError(f"resume={run_dir}: the run finished (record.json status ok); there is nothing to resume")
    cfg = OmegaConf.load(run_dir / CONFIG_FILE)
    attempts = check_resume(cfg, run_dir, earlier_record(run_dir), allow_changed_data)
    internal, logs = run_dir / INTERNAL_DIR, run_dir / "logs"
    clear_earlier_attempt(run_dir)  # the interrupted attempt's hand-offs must not speak for this one
    for log in [*logs.glob("torchrun.log"), *logs.glob("torchrun-h*.log")]:  # one per host under cluster=emulated
        if "-until-epoch-" in log.name:
            continue  # an earlier attempt's, already kept
        log.replace(kept_log_path(log, latest["epoch"]))
    say(f"resuming from the checkpoint of epoch {latest['epoch']}")
    marker = internal / RESUME_FILE
    write_json_atomic(marker, {"from_epoch": latest["epoch"], "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    try:
        return run_job(cfg, run_dir, extra={"resumed_from_epoch": latest["epoch"], "earlier_attempts": attempts})
    finally:
        marker.unlink(missing_ok=True)


def kept_log_path(log: Path, epoch: int) -> Path:
    """Where an interrupted attempt's log is kept: ``<stem>-until-epoch-<epoch>.log``, or ``...-<k>.log`` when an
    earlier attempt already ended at that checkpoint (a resume that failed again before its next one)."""
    kept = log.with_name(f"{log.stem}-until-epoch-{epoch}.log")
    k = 2
    while kept.exists():
        kept = log.with_name(f"{log.stem}-until-epoch-{epoch}-{k}.log")
        k += 1
    return kept


def prepare_data(cfg: DictConfig) -> tuple[Path, dict]:
    """Load the dataset and build (or reuse) its cached parts, before any rank starts."""
    t0 = time.perf_counter()
    declared = method_resources(cfg)
    cached = None if declared["model"].propagated_inputs else _cached_summary(cfg, declared["parallel"].shared_part)
    if cached is not None:  # its parts are cached and its files unchanged: no load (gnnq.data.summary)
        graph, parts_dir, meta = cached
        for note in graph.notes:
            warn(note)
        graph_mib_ = graph.mib
    else:
        graph = _load_and_summarize(cfg)
        graph_mib_ = graph_mib(graph)
    nparts = cfg.cluster.nproc * cfg.cluster.hosts
    if nparts > graph.num_nodes:
        raise ConfigError(
            f"cluster.nproc x cluster.hosts = {nparts} partitions, but dataset {graph.name} has only "
            f"{graph.num_nodes} nodes"
        )
    say(
        f"dataset {graph_name(cfg.dataset)}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
        f"{graph.num_features} features, {graph.num_classes} classes ({time.perf_counter() - t0:.1f}s)"
    )
    fingerprint = {"dataset_fingerprint": graph.fingerprint()} if cfg.dataset.name == FILES else {}
    method = declared["parallel"]
    if method.single_label and graph.multilabel:
        raise ConfigError(
            f"parallel={cfg.parallel.name} trains single-label classification; dataset {graph.name} is multi-label"
        )
    if declared["model"].propagated_inputs:
        from gnnq.data.gamlp import gamlp_graph

        t0 = time.perf_counter()
        graph = gamlp_graph(graph, cfg.model.hops, data_root(cfg.dataset) / "gamlp")
        say(
            f"GA-MLP inputs [X, AX, ..., A^{cfg.model.hops}X]: {graph.num_features} features "
            f"({time.perf_counter() - t0:.1f}s)"
        )
    if method.shared_part:
        nparts = 1  # e.g. layer-parallel ADMM: every rank reads the whole (edgeless) GA-MLP graph
    parts_root = data_root(cfg.dataset) / "parts"
    before = {}

    def check_memory() -> None:  # only when the parts must be built: the launcher's METIS peak, the ranks' floor
        before.update(check_before_partitioning(cfg, graph, nparts))
        say(
            f"memory estimate: launcher {before['launcher_mib'] / 1024:.1f} GiB while partitioning, "
            f"each rank at least {before['rank_floor_mib'] / 1024:.1f} GiB"
        )

    try:
        if cached is None:
            parts_dir, meta = prepare_parts(
                graph, cfg.partitioner.name, cfg.partitioner.seed, nparts, parts_root, check_memory
            )
    except OSError as exc:  # a read-only or full data root, or a file in its place
        key = data_root_key(cfg.dataset)
        check_writable(parts_root, key)  # names a file in the way, or a root where nothing can be created
        raise CacheError(
            f"{key}: cannot write the partition cache under {parts_root} ({describe_os_error(exc)}); "
            f"set {key} to a writable directory (complete data and parts are read without writing)"
        ) from None
    meta = {
        **meta,
        **fingerprint,
        "memory_estimate_mib_per_rank": check_launch_resources(
            cfg, meta, graph.num_features, graph_mib_, graph.num_classes
        ),
    }
    if before:
        meta["memory_estimate_launcher_mib"] = before["launcher_mib"]
    if method.shared_part:
        kept = {"block": "a block of layers", "one": "one layer", "all": "every layer"}[method.kept_layers]
        ranks = cfg.cluster.nproc * cfg.cluster.hosts
        say(f"{cfg.parallel.name}: each of {ranks} rank(s) holds the whole {graph.name} input and {kept}")
    else:
        cut = meta["edge_cut"] / max(1, meta["num_edges"])
        say(f"{nparts} parts ({cfg.partitioner.name}): edge cut {cut:.1%}, halo nodes per part {meta['halo_nodes']}")
    return parts_dir, meta


def _parts_of(cfg: DictConfig, shared_part: bool) -> tuple[int, Path]:
    """(how many parts the run's ranks read, the partition cache root)."""
    return (1 if shared_part else cfg.cluster.nproc * cfg.cluster.hosts), data_root(cfg.dataset) / "parts"


def _recipe(cfg: DictConfig) -> str | None:
    sources = dataset_sources(cfg.dataset)
    if sources is None:
        return None
    return recipe(OmegaConf.to_container(cfg.dataset, resolve=True), sources)


def _cached_summary(cfg: DictConfig, shared_part: bool) -> tuple[GraphSummary, Path, dict] | None:
    """(the dataset's summary, its parts' cache entry, their metadata) when both are kept and its files are
    unchanged since they were made; None: load it."""
    nparts, parts_root = _parts_of(cfg, shared_part)
    key = _recipe(cfg)
    summary = read_summary(parts_root, key) if key else None
    if summary is None or nparts > summary.num_nodes:
        return None
    found = cached_parts(summary.content, cfg.partitioner.name, cfg.partitioner.seed, nparts, parts_root, quiet=True)
    return None if found is None else (summary, *found)


def _load_and_summarize(cfg: DictConfig):
    """Load the dataset; keep its summary for the next run of it (gnnq.data.summary)."""
    notes: list[str] = []
    graph = load_dataset(cfg.dataset, notes)
    key = _recipe(cfg)
    if key:
        summary = GraphSummary(
            graph.name,
            graph.num_nodes,
            graph.num_edges,
            graph.num_features,
            graph.num_classes,
            bool(graph.multilabel),
            graph.fingerprint(),
            graph_mib(graph),
            notes,
        )
        write_summary(data_root(cfg.dataset) / "parts", key, summary)
    return graph


def launch(cfg: DictConfig, run_dir: Path, parts_dir: Path, on_row: Callable[[dict], None]) -> dict:
    """Start the ranks and follow them; every epoch row rank 0 reports goes to the progress line and ``on_row``."""
    progress = ProgressLine(cfg.trainer.epochs)

    def follow(row: dict) -> None:
        progress.update(row)
        on_row(row)

    try:
        if cfg.cluster.name == "emulated":
            code, logs, info = run_emulated(cfg, run_dir, parts_dir, say, follow)
            return {**collect_result(run_dir, code, logs, cfg.cluster.nproc), "emulated": info}
        pools = warm_pool.active()
        if pools is not None and pools.serves(cfg):  # a multirun under the warm launcher: ranks kept across points
            say(
                f"running {cfg.cluster.nproc} rank(s) on the warm pool ({cfg.model.name}, {cfg.parallel.name}, "
                f"{cfg.quantizer.name})"
            )
            log = run_dir / "logs" / "torchrun.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            code, exits = pools.run(cfg, run_dir, parts_dir, log, follow)
            return collect_result(run_dir, code, [log], exits=exits)
        placement = place(cfg, run_dir, parts_dir)
        for note in placement.notes:
            say(note)
        say(f"launching {placement.how} ({cfg.model.name}, {cfg.parallel.name}, {cfg.quantizer.name})")
        log = run_dir / "logs" / "torchrun.log"  # the name kept from when torchrun started local ranks too
        if placement.local_ranks:
            code = run_local_ranks(run_dir, parts_dir, placement.local_ranks, log, follow)
        else:
            code = run_torchrun(placement.cmd, log, follow)
        return {**collect_result(run_dir, code, [run_dir / "logs" / "torchrun.log"]), **placement.summary}
    finally:
        progress.close()


def collect_result(
    run_dir: Path, code: int, logs: list[Path], ranks_per_log: int = 0, exits: dict[int, int] | None = None
) -> dict:
    """Rank 0's summary of a job that exited with ``code``; a LaunchError naming the cause if it failed.

    ``exits``: ranks' exit codes the launcher saw itself (a warm pool's; torchrun's are in its log)."""
    if code != 0:
        raise LaunchError(describe_failure(run_dir, code, logs, ranks_per_log, exits))
    result = run_dir / INTERNAL_DIR / RESULT_FILE
    if not result.is_file():
        raise LaunchError(f"torchrun exited 0 but rank 0 left no result (see {logs[0]})")
    return json.loads(result.read_text())
