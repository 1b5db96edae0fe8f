"""Checks of config values that types alone cannot express. Each error names its key."""

from __future__ import annotations

import math
import typing
from dataclasses import is_dataclass
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from gnnq.config.registry import (
    CLUSTERS,
    FULL_GRAPH_TRAINER,
    PARALLEL,
    QUANTIZERS,
    choice_schema,
    group_registries,
    registries,
    resolve,
)
from gnnq.config.schema import Bounds, Config, schema_bounds
from gnnq.errors import ConfigError

# Values of keys that are not a choice of a registry (those: gnnq.config.registry, see allowed_values()).
ALLOWED = {
    "model.norm": ("layer", "none"),
    "model.layer_order": ("norm_act_dropout", "dropout_norm_act"),
    "quantizer.solver": ("greedy", "milp"),
    "quantizer.time_model": ("profile", "fixed"),
    "quantizer.time_objective": ("max_channel", "ring_rounds", "sender_uplink"),
    "quantizer.trace": ("cycle", "last_epoch"),
    "quantizer.profile_range": ("sent", "fp32", "published"),
    "quantizer.backward_influence": ("returned", "adaqp"),
    "quantizer.param_dtype": ("fp16", "fp32"),
    "quantizer.nonfinite": ("error", "zero"),
    "parallel.rho_schedule": ("none", "grow", "paper", "paper_q"),
    "parallel.init": ("warmup2", "chain"),
    "parallel.hidden_init": ("he", "identity"),
    "parallel.blocks": ("cost", "layers"),
    "parallel.z_out": ("gnnq", "authors"),
    "parallel.z_pick": ("gnnq", "authors"),
    "parallel.warmup": ("sync", "zeros"),
    "parallel.smooth": ("both", "features", "gradients"),
    "parallel.sample_size": ("floor", "at_least_one"),
    "parallel.split": ("columns", "central"),
    "parallel.inputs": ("once", "every_epoch"),
    "parallel.stale_rows": ("post_dropout", "pre_dropout"),
    "parallel.permutation": ("none", "single", "double"),
    "parallel.weight_init": ("glorot", "plexus"),
    "cluster.link": ("1gbit", "10gbit", "25gbit", "custom"),
    "cluster.pin_cores": ("auto", "on", "off"),
    "cluster.backend": ("auto", "gloo", "nccl"),
    "cluster.device": ("auto", "cpu", "cuda"),
    "logger.mode": ("offline", "online"),
    "trainer.nonfinite_loss": ("error", "warn"),
    "trainer.grad_sync.mode": ("allreduce", "fp16", "bf16", "powersgd", "codec"),
    "trainer.grad_sync.bits": (1, 2, 4, 8),
}


def allowed_values() -> dict[str, tuple]:
    """Every key with a fixed set of values: the registries' names (``model.name``, ``trainer.optimizer``) and
    ALLOWED."""
    return {**{key: registry.names() for key, registry in registries().items()}, **ALLOWED}


_ABSENT = object()


def _get(cfg: DictConfig, key: str):
    """The value at ``key``; _ABSENT where the chosen option has no such key (parallel.momentum with parallel=sync)."""
    node = cfg
    for part in key.split("."):
        if part not in node.keys():  # `in` alone would treat MISSING values as absent
            return _ABSENT
        node = node[part]
    return node


def check_known_keys(cfg: DictConfig, schema: DictConfig | None = None, prefix: str = "") -> None:
    """Reject keys the schema does not have (``+key=value`` appends bypass struct mode); a group's keys are its
    chosen option's (gnnq.config.registry), and its node must be that option's (``parallel.name=stale`` alone is
    not)."""
    if schema is None:
        schema = OmegaConf.structured(Config)
    for key in cfg.keys():
        if key == "hydra" and not prefix:
            continue
        known = [str(k) for k in schema.keys()]  # `in` would treat MISSING values as absent
        if key not in known:
            raise ConfigError(f"{prefix}{key}: no such key; allowed keys there: {', '.join(known)}")
        free_form = OmegaConf.get_type(schema, key) is dict  # Dict[str, Any] fields take any key
        if not prefix and key in group_registries():
            check_choice_keys(str(key), cfg[key])
        elif isinstance(cfg[key], DictConfig) and isinstance(schema._get_node(key), DictConfig) and not free_form:
            check_known_keys(cfg[key], schema[key], f"{prefix}{key}.")


def check_choice_keys(group: str, node: DictConfig) -> None:
    """``node`` holds exactly the keys of ``group``'s option ``node.name``, in that option's own schema."""
    registry = group_registries()[group]
    name = node.name
    if name not in registry:
        raise ConfigError(f"{group}.name={name!r} is not allowed; allowed: {', '.join(registry.names())}")
    schema_cls = registry.schema(name)
    schema = OmegaConf.structured(schema_cls)
    keys = [str(k) for k in schema.keys()]
    for key in node.keys():
        if key not in keys:
            raise ConfigError(no_such_key_message(group, str(key), name, keys))
    if OmegaConf.get_type(node) not in (schema_cls, dict) or any(k not in node.keys() for k in keys):
        raise ConfigError(
            f"{group}.name={name} is not allowed on its own: choose the option with {group}={name}, "
            f"which brings its keys ({', '.join(keys)})"
        )
    for key in keys:
        value = node._get_node(key)
        if isinstance(value, DictConfig) and OmegaConf.get_type(schema, key) is not dict:
            check_known_keys(node[key], schema[key], f"{group}.{key}.")


def no_such_key_message(group: str, key: str, choice: str, allowed: list[str]) -> str:
    return f"{group}.{key}: no such key for {group}={choice}; allowed keys: {', '.join(allowed)}"


def check_finite(cfg: DictConfig, prefix: str = "") -> None:
    """Reject NaN and infinite floats, which every bound check below would let through."""
    for key in cfg.keys():
        if key == "hydra" and not prefix:
            continue
        value = cfg[key]
        if isinstance(value, DictConfig):
            check_finite(value, f"{prefix}{key}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{prefix}{key}={value} is not allowed; it must be a finite number")


def _check_needs(cfg: DictConfig) -> None:
    """Every method's ``needs`` (gnnq.config.registry): the choices of other groups it works with."""
    from gnnq.config.registry import METHODS

    for group, registry in METHODS.items():
        name = cfg[group].name
        for need in registry.choice(name).needs:
            other = cfg[need.group].name
            if other not in need.allowed:
                raise ConfigError(f"{group}={name} is not allowed with {need.group}={other}; {need.why}")


def _check_parallel(cfg: DictConfig) -> None:
    p = cfg.parallel
    _check_needs(cfg)
    for group in ("parallel", "model"):  # a method's own checks (gnnq.config.method_checks), from its registry line
        check = group_registries()[group].choice(cfg[group].name).check
        if check:
            resolve(check)(cfg)
    if p.get("inputs") == "every_epoch" and cfg.quantizer.get("quantize_input"):
        raise ConfigError(
            "quantizer.quantize_input=true is not allowed with parallel.inputs=every_epoch (the features then travel "
            "as every forward message does, quantized in training); use quantize_input with parallel.inputs=once"
        )
    if p.get("stale_rows") == "pre_dropout" and cfg.model.get("layer_order") == "dropout_norm_act":
        raise ConfigError(
            "parallel.stale_rows=pre_dropout is not allowed with model.layer_order=dropout_norm_act (its rows end in "
            "LayerNorm and ReLU, not dropout); use model.layer_order=norm_act_dropout or stale_rows=post_dropout"
        )
    if cfg.trainer.get("trace") and not PARALLEL.choice(p.name).traced:
        traced = ", ".join(n for n in PARALLEL.names() if PARALLEL.choice(n).traced)
        raise ConfigError(
            f"trainer.trace=true is not supported with parallel={p.name}; allowed with parallel={traced}, or set "
            "trainer.trace=false"
        )
    mode = cfg.trainer.grad_sync.mode if cfg.trainer.get("grad_sync") is not None else "allreduce"
    if mode != "allreduce" and PARALLEL.choice(p.name).trainer != FULL_GRAPH_TRAINER:
        full_graph = ", ".join(n for n in PARALLEL.names() if PARALLEL.choice(n).trainer == FULL_GRAPH_TRAINER)
        raise ConfigError(
            f"trainer.grad_sync.mode={mode} is not supported with parallel={p.name} (it has no gradient all-reduce "
            f"to compress); allowed with parallel={full_graph}, or set trainer.grad_sync.mode=allreduce"
        )
    no_checkpoints = PARALLEL.choice(p.name).no_checkpoints
    if cfg.trainer.checkpoint_every and no_checkpoints:
        raise ConfigError(
            f"trainer.checkpoint_every={cfg.trainer.checkpoint_every} is not supported with parallel={p.name} "
            f"({no_checkpoints}); set trainer.checkpoint_every=0 here"
        )


def resolve_fanouts(fanouts: Sequence[int], layers: int) -> list[int]:
    """parallel.fanouts as one value per layer (input layer first); one value applies to every layer."""
    values = [int(f) for f in fanouts]
    if len(values) == 1:
        values = values * layers
    if len(values) != layers:
        raise ValueError(
            f"parallel.fanouts={values} is not allowed: give one value (used for every layer) "
            f"or one per layer (model.layers={layers}), input layer first"
        )
    if any(f != -1 and f < 1 for f in values):
        raise ValueError(
            f"parallel.fanouts={values} is not allowed: each must be a positive neighbour count or -1 (all neighbours)"
        )
    return values


def check_fractions(train_frac: float, val_frac: float) -> None:
    """The one check of ``dataset.train_frac`` / ``dataset.val_frac`` (validate and every split call it):
    ConfigError unless 0 < train_frac, 0 <= val_frac and train_frac + val_frac < 1, so some nodes are left to test."""
    if not (train_frac > 0 and val_frac >= 0 and train_frac + val_frac < 1):
        raise ConfigError(
            f"dataset.train_frac={train_frac} and dataset.val_frac={val_frac} are not allowed: need train_frac > 0, "
            "val_frac >= 0 and train_frac + val_frac < 1 (nodes left to test)"
        )


def chosen_bounds(cfg: DictConfig) -> dict[str, Bounds]:
    """The bounds the schema fields of ``cfg``'s chosen options declare (``bounded`` in gnnq.config.schema), by
    dotted key, in the schema's order."""
    out: dict[str, Bounds] = {}
    for group, hint in typing.get_type_hints(Config).items():
        if group in group_registries():
            out.update(schema_bounds(choice_schema(group, cfg[group].name), f"{group}."))
        elif is_dataclass(hint):
            out.update(schema_bounds(hint, f"{group}."))
    return out


def all_bounds() -> dict[str, Bounds]:
    """The bounds of every key of every choice (a key shared by choices has the same bounds in each: a unit test
    checks it), by dotted key."""
    out: dict[str, Bounds] = {}
    for group, hint in typing.get_type_hints(Config).items():
        classes = [c.schema for c in group_registries()[group].choices()] if group in group_registries() else [hint]
        for cls in filter(is_dataclass, classes):
            out.update(schema_bounds(cls, f"{group}."))
    return out


def check_bounds(key: str, value, bounds: Bounds) -> None:
    """ConfigError naming ``key`` when ``value`` is outside ``bounds`` (absent and null values pass)."""
    if value is _ABSENT or value is None:
        return
    low, high = bounds.low, bounds.high
    if low is not None and (value < low or (bounds.low_exclusive and value == low)):
        raise ConfigError(f"{key}={value} is not allowed; it must be {'>' if bounds.low_exclusive else '>='} {low}")
    if high is not None and (value > high or (bounds.high_exclusive and value == high)):
        inclusive = low is not None and not bounds.low_exclusive and not bounds.high_exclusive
        allowed = f" (allowed: {low}..{high})" if inclusive else ""
        raise ConfigError(
            f"{key}={value} is not allowed; it must be {'<' if bounds.high_exclusive else '<='} {high}{allowed}"
        )


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value that is not allowed (gnnq.launch.preflight checks what needs the data)."""
    check_known_keys(cfg)  # also: every group's name is one of its registry's
    check_finite(cfg)
    for key, allowed in allowed_values().items():
        value = _get(cfg, key)
        if value is not _ABSENT and value not in allowed:
            raise ConfigError(f"{key}={value!r} is not allowed; allowed: {', '.join(allowed)}")
    for key, bounds in chosen_bounds(cfg).items():
        check_bounds(key, _get(cfg, key), bounds)
    d = cfg.dataset
    if "train_frac" in d:
        check_fractions(d.train_frac, d.val_frac)
    if d.name == "synthetic" and d.num_classes > d.num_nodes:
        raise ConfigError(
            f"dataset.num_classes={d.num_classes} is not allowed; it must be <= dataset.num_nodes={d.num_nodes}"
        )
    check = QUANTIZERS.choice(cfg.quantizer.name).check  # the codec family's own values (gnnq.config.method_checks)
    if check:
        resolve(check)(cfg)
    _check_parallel(cfg)
    if cfg.cluster.memory_limit_gib is not None and cfg.cluster.memory_limit_gib <= 0:
        raise ConfigError(
            f"cluster.memory_limit_gib={cfg.cluster.memory_limit_gib} is not allowed; it must be null or > 0 (GiB)"
        )
    if cfg.cluster.device == "cpu" and cfg.cluster.backend == "nccl":
        raise ConfigError(
            "cluster.device=cpu is not allowed with cluster.backend=nccl (NCCL moves CUDA tensors only); "
            "use cluster.backend=gloo or cluster.device=auto|cuda"
        )
    resolve(CLUSTERS.choice(cfg.cluster.name).check)(cfg)  # the cluster's own values (gnnq.config.clusters)
    if cfg.dataset.name == "files" and not cfg.dataset.path:
        raise ConfigError(
            "dataset.path is required with dataset=files: a directory holding edges, features and labels "
            "(dataset.path=DIR, or GNNQ_FILES_PATH=DIR in the environment)"
        )
