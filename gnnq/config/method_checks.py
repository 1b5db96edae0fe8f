"""The checks of a method's own values: one function per registry entry that has some (``Choice.check`` in
gnnq.config.registry names it), given the whole config. validate.py calls the entry's function and names no
method itself; a check here may name its own method and the choices it combines with.
"""

from __future__ import annotations

import math

from omegaconf import DictConfig, OmegaConf

from gnnq.config.clusters import world_size
from gnnq.config.validate import resolve_fanouts
from gnnq.errors import ConfigError

QUANT_BITS = (1, 2, 4, 8)


def check_grid(cfg: DictConfig) -> None:
    q = cfg.quantizer
    if not 2 <= q.grid_levels <= 2**16:
        raise ConfigError(f"quantizer.grid_levels={q.grid_levels} is not allowed; it must be in 2..65536")
    if not q.grid_max > q.grid_min:
        raise ConfigError(
            f"quantizer.grid_max={q.grid_max} is not allowed; it must be > quantizer.grid_min={q.grid_min}"
        )
    if not (q.quantize_p or q.quantize_q):
        raise ConfigError(
            "quantizer.quantize_p=false with quantizer.quantize_q=false is not allowed: quantizer=grid needs "
            "one of them; for fp32 messages use quantizer=fp32"
        )


def check_uniform(cfg: DictConfig) -> None:
    q = cfg.quantizer
    if q.bits not in QUANT_BITS:
        raise ConfigError(f"quantizer.bits={q.bits} is not allowed; allowed: {', '.join(map(str, QUANT_BITS))}")
    if q.grad_bits is not None and q.grad_bits not in QUANT_BITS + (32,):
        raise ConfigError(f"quantizer.grad_bits={q.grad_bits} is not allowed; allowed: null, 1, 2, 4, 8, 32")


def check_adaptive(cfg: DictConfig) -> None:
    check_uniform(cfg)
    q = cfg.quantizer
    choices = list(q.bit_choices)
    if not choices or any(b not in QUANT_BITS for b in choices) or len(set(choices)) != len(choices):
        raise ConfigError(
            f"quantizer.bit_choices={choices} is not allowed; give distinct widths from "
            f"{', '.join(map(str, QUANT_BITS))}"
        )
    if q.grad_bits is not None:
        raise ConfigError(
            f"quantizer.grad_bits={q.grad_bits} is not allowed with quantizer=adaptive (gradients are assigned "
            "too); use null"
        )
    for key, low in (("group_size", 1), ("assign_cycle", 1), ("profile_repeats", 1)):
        if q[key] < low:
            raise ConfigError(f"quantizer.{key}={q[key]} is not allowed; it must be >= {low}")
    if q.milp_time_limit_s <= 0:
        raise ConfigError(f"quantizer.milp_time_limit_s={q.milp_time_limit_s} is not allowed; it must be > 0")
    if not 0.0 <= q.variance_weight <= 1.0:
        raise ConfigError(f"quantizer.variance_weight={q.variance_weight} is not allowed; it must be in [0, 1]")
    _check_assign_cycle(cfg)


def _check_assign_cycle(cfg: DictConfig) -> None:
    """An assign_cycle given explicitly must let a reassignment happen; the default follows trainer.epochs
    (gnnq.config.resolvers), so a preset runs at any length."""
    q, epochs = cfg.quantizer, cfg.trainer.epochs
    if OmegaConf.is_interpolation(q, "assign_cycle") or q.assign_cycle < epochs:
        return
    from gnnq.config.resolvers import default_assign_cycle

    raise ConfigError(
        f"quantizer.assign_cycle={q.assign_cycle} is not allowed with trainer.epochs={epochs}: no reassignment "
        f"would happen; it must be < trainer.epochs: leave it out (the default follows the run's length, here "
        f"{default_assign_cycle(epochs)}), set a smaller one, or use quantizer=uniform; in a sweep that mixes "
        f"methods, ++quantizer.assign_cycle=N sets it only for the points with quantizer=adaptive"
    )


def _check_chain(p: DictConfig, layers: int) -> None:
    """parallel.init=chain: one value per stage in every chain_* list, depths rising from 2 to below model.layers."""
    keys = ("chain_layers", "chain_iterations", "chain_rho", "chain_mu")
    lengths = {len(p[k]) for k in keys}
    if len(lengths) != 1 or not p.chain_layers:
        raise ConfigError(
            f"parallel.{', parallel.'.join(keys)} are not allowed with lengths "
            f"{[len(p[k]) for k in keys]}; give one value per chain stage in each (at least one stage)"
        )
    depths = list(p.chain_layers)
    if depths[0] < 2 or any(b <= a for a, b in zip(depths, depths[1:])) or depths[-1] >= layers:
        raise ConfigError(
            f"parallel.chain_layers={depths} is not allowed with model.layers={layers}; "
            f"give rising depths from >= 2 to < {layers}"
        )
    for key, strict in (("chain_iterations", False), ("chain_rho", True), ("chain_mu", False)):
        if not all(math.isfinite(v) and (v > 0 if strict else v >= 0) for v in p[key]):
            raise ConfigError(
                f"parallel.{key}={list(p[key])} is not allowed; every value must be finite and "
                f"{'>' if strict else '>='} 0"
            )
    tol = p.chain_stall_tol
    if tol is not None and (len(tol) != len(depths) or not all(math.isfinite(v) and v >= 0 for v in tol)):
        raise ConfigError(
            f"parallel.chain_stall_tol={list(tol)} is not allowed with {len(depths)} chain stages; give one finite "
            "value >= 0 per stage, or null (1e-3 in every stage)"
        )


def check_admm(cfg: DictConfig) -> None:
    """parallel=admm trains a plain ReLU MLP, a block of layers per rank."""
    p, m = cfg.parallel, cfg.model
    if m.dropout != 0 or m.norm != "none":
        raise ConfigError(
            f"model.dropout={m.dropout}, model.norm={m.norm} are not allowed with parallel=admm (it trains a plain "
            "ReLU MLP); use model.dropout=0 model.norm=none"
        )
    if p.rho_schedule != "none" and cfg.trainer.eval_every != 1:
        raise ConfigError(
            f"trainer.eval_every={cfg.trainer.eval_every} is not allowed with "
            f"parallel.rho_schedule={p.rho_schedule}: the "
            "schedule reads every iteration's training loss; use trainer.eval_every=1"
        )
    if p.init == "chain":
        _check_chain(p, m.layers)
    if p.rho_schedule != "none" and p.rho > p.rho_max:
        raise ConfigError(
            f"parallel.rho={p.rho} is not allowed with parallel.rho_max={p.rho_max}; it must be <= rho_max"
        )
    ranks = world_size(cfg)
    if ranks > m.layers:
        raise ConfigError(
            f"cluster.nproc x cluster.hosts = {ranks} ranks is not allowed with model.layers={m.layers} under "
            "parallel=admm: each rank needs at least one layer"
        )


def check_gamlp(cfg: DictConfig) -> None:
    """model=gamlp: ADMM (parallel=admm checks itself) or the gradient baselines, which send no halo message."""
    p, q = cfg.parallel, cfg.quantizer
    if p.name == "admm":
        return
    if p.name != "sync":
        raise ConfigError(
            f"parallel={p.name} is not allowed with model=gamlp; allowed: sync (gradient baselines), admm"
        )
    if q.name != "fp32":
        raise ConfigError(
            f"quantizer={q.name} is not allowed with model=gamlp and parallel=sync (no halo messages); use "
            "quantizer=fp32"
        )


def check_minibatch(cfg: DictConfig) -> None:
    p = cfg.parallel
    try:
        resolve_fanouts(p.fanouts, cfg.model.layers)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if world_size(cfg) != 1:
        raise ConfigError(
            f"parallel={p.name} is a single-process reference; cluster.nproc={cfg.cluster.nproc} x "
            f"cluster.hosts={cfg.cluster.hosts} is not allowed, use cluster.nproc=1 cluster.hosts=1"
        )


def check_tensor3d(cfg: DictConfig) -> None:
    if cfg.model.norm != "none":
        raise ConfigError(
            f"model.norm={cfg.model.norm} is not allowed with parallel={cfg.parallel.name} (its GCN has no "
            "normalization layer, as Plexus's has none); use model.norm=none"
        )
