"""Compose and validate configs before any rank starts, turning every error into one line."""

from __future__ import annotations

import importlib.util
import itertools
from dataclasses import fields, is_dataclass
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

import gnnq.config.published  # noqa: F401 - registers the resolver ${published:...} the presets read
import gnnq.config.resolvers  # noqa: F401 - registers gnnq_path and gnnq_assign_cycle (conf/, the schema)
from gnnq.config.registry import group_registries
from gnnq.config.schema import Config
from gnnq.config.validate import no_such_key_message, validate
from gnnq.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _shipped_dir(name: str) -> Path:
    """The checkout's top-level ``conf/`` or ``sweeps/``, wherever gnnq is imported from.

    A wheel (``pip install .``) holds them as the packages ``gnnq.conf`` and ``gnnq.sweeps`` (pyproject's
    package-dir), so they sit inside the installed package. A source checkout (editable install, or PYTHONPATH)
    has them next to ``gnnq/``. Anything else, e.g. an editable install with another layout: the importable
    package ``gnnq.<name>``."""
    inside, beside = PACKAGE_DIR / name, PACKAGE_DIR.parent / name
    if inside.is_dir():
        return inside
    if beside.is_dir() and (PACKAGE_DIR.parent / "pyproject.toml").is_file():
        return beside
    spec = importlib.util.find_spec(f"gnnq.{name}")
    found = [Path(p) for p in (spec.submodule_search_locations or []) if Path(p).is_dir()] if spec else []
    return found[0] if found else beside  # none: check_conf_dir names the missing directory


CONF_DIR = _shipped_dir("conf")  # Hydra's config groups: top-level conf/, shipped as gnnq.conf
SWEEPS_DIR = _shipped_dir("sweeps")  # the sweep files: top-level sweeps/, shipped as gnnq.sweeps
MAX_SWEEP_POINTS = 10000


# cluster=slurm (conf/cluster/slurm.yaml) selects these: hydra-submitit-launcher's Slurm launcher with its
# sbatch parameters from cluster.* (hydra_plugins/gnnq_slurm_launcher/), and multirun mode even without -m,
# so that the launcher submits every run.
SLURM_LAUNCHER = {
    "_target_": "hydra_plugins.gnnq_slurm_launcher.gnnq_slurm_launcher.GnnqSlurmLauncher",
    "submitit_folder": "${hydra.sweep.dir}/.submitit/%j",
}
MULTIRUN_MODE = {"hydra": {"mode": "MULTIRUN"}}
# A local multirun's launcher (conf/cluster/local.yaml): the basic one, with the ranks kept warm across points
# (hydra_plugins/gnnq_warm_launcher/, gnnq/launch/warm_pool.py); hydra/launcher=basic opts out.
WARM_LAUNCHER = {"_target_": "hydra_plugins.gnnq_warm_launcher.gnnq_warm_launcher.GnnqWarmLauncher"}
SCHEMA_GROUP = "schema"  # the choices' dataclasses: /schema/<group>/<choice> in the ConfigStore


def register_configs() -> None:
    """Put the schema, every choice's dataclass and gnnq's launchers (Slurm, warm) into Hydra's ConfigStore."""
    cs = ConfigStore.instance()
    cs.store(name="gnnq_schema", node=Config)
    for group, registry in group_registries().items():
        for choice in registry.choices():
            cs.store(group=f"{SCHEMA_GROUP}/{group}", name=choice.name, node=choice.schema, provider="gnnq")
    cs.store(group="hydra/launcher", name="gnnq_slurm", node=SLURM_LAUNCHER, provider="gnnq")
    cs.store(group="hydra/launcher", name="gnnq_warm", node=WARM_LAUNCHER, provider="gnnq")
    cs.store(group="hydra/run_mode", name="multirun", node=MULTIRUN_MODE, provider="gnnq")


def expand_sweep(overrides: list[str]) -> list[list[str]]:
    """All override lists a multirun over ``overrides`` would compose (basic sweeper semantics)."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise ConfigError(_composition_message(exc)) from None
    axes = []
    for o in parsed:
        if o.is_sweep_override():
            key = o.get_key_element()
            axes.append([f"{key}={v}" for v in o.sweep_string_iterator()])
        else:
            axes.append([o.input_line])
        if not axes[-1] or (not o.is_delete() and o.input_line.endswith("=")):
            raise ConfigError(
                f"{o.input_line}: this sweep axis has no value; give one or more, e.g. {o.get_key_element()}=0,1 "
                f"(an empty string: {o.get_key_element()}='')"
            )
    points = []
    for combo in itertools.product(*axes):
        points.append(list(combo))
        if len(points) > MAX_SWEEP_POINTS:
            raise ConfigError(f"the sweep has more than {MAX_SWEEP_POINTS} points; split it")
    return points


def check_conf_dir() -> None:
    if not (CONF_DIR / "config.yaml").is_file():
        raise ConfigError(f"gnnq's config directory {CONF_DIR} is missing: reinstall gnnq (pip install .)")


def resolve_config_dir(config_dir: str) -> Path:
    """Hydra's ``--config-dir``: a directory, or the name of one shipped with gnnq (``sweeps``), from anywhere."""
    path = Path(config_dir).expanduser()
    shipped = SWEEPS_DIR.joinpath(*path.parts[1:]) if path.parts and path.parts[0] == "sweeps" else None
    if not path.is_dir() and not path.is_absolute() and shipped is not None and shipped.is_dir():
        return shipped.resolve()
    return path.resolve()


def compose_config(
    overrides: list[str], config_name: str = "config", config_dir: str | None = None, *, check: bool = True
) -> DictConfig:
    """Compose like ``gnnq`` does and validate (unless ``check`` is False); raise ConfigError with a one-line message.

    ``config_dir`` is Hydra's ``--config-dir`` (e.g. ``sweeps/``): its configs may build on
    gnnq's own (``defaults: [config]``). Then the result also holds the ``hydra`` node.
    """
    check_conf_dir()
    check_groups_once(overrides, config_dir)
    register_configs()
    GlobalHydra.instance().clear()
    primary, extra = CONF_DIR, []
    if config_dir:
        primary = resolve_config_dir(config_dir)
        if not primary.is_dir():
            raise ConfigError(f"--config-dir {config_dir}: no such directory")
        extra = [f"hydra.searchpath=[file://{CONF_DIR}]"]
    try:
        with initialize_config_dir(config_dir=str(primary), version_base="1.3"):
            user = [o for o in overrides if not o.lstrip("+~").startswith("hydra.")]
            cfg = compose(config_name, overrides=user + extra, return_hydra_config=bool(config_dir))
    except MissingConfigException as exc:
        raise ConfigError(_missing_option_message(exc, overrides)) from None
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_composition_message(exc)) from None
    except yaml.YAMLError as exc:  # a config or sweep file that is not YAML: name it and the line
        raise ConfigError(yaml_error_message(exc)) from None
    finally:
        GlobalHydra.instance().clear()
    drop_where_absent(cfg, overrides)
    if not check:
        return cfg
    try:
        validate(cfg)  # reads every value: missing values and broken interpolations surface here
    except OmegaConfBaseException as exc:
        raise ConfigError(_composition_message(exc)) from None
    return cfg


def yaml_error_message(exc: yaml.YAMLError) -> str:
    """``<file>, line N, column C: <what the parser says>; fix the YAML there`` from a PyYAML error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p)
    if mark is None:
        return f"a config file is not valid YAML: {_first_line(str(exc))}"
    return (
        f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: not valid YAML "
        f"({problem or _first_line(str(exc))}); fix the file there (indentation, a missing ':' or closing bracket)"
    )


def config_groups(config_dir: str | None = None) -> set[str]:
    """The config groups a ``<group>=<choice>`` override picks from: gnnq's conf/ folders and a --config-dir's."""
    dirs = [CONF_DIR] + ([resolve_config_dir(config_dir)] if config_dir else [])
    found = {p.name for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return (found | set(group_registries()) | {"experiment"}) - {"hydra"}


def check_groups_once(overrides: list[str], config_dir: str | None = None) -> None:
    """ConfigError naming both values when a group is chosen twice (``dataset=cora dataset=citeseer``: Hydra would
    silently take the last)."""
    groups, seen = config_groups(config_dir), {}
    for o in overrides:
        if o.startswith("~") or "=" not in o:
            continue
        key, value = o.split("=", 1)
        group = key.lstrip("+").split("@", 1)[0]
        if group not in groups:
            continue
        if group in seen and seen[group].split("=", 1)[1] != value:  # the same choice again says nothing new
            raise ConfigError(
                f"{group} is chosen twice: {seen[group]} and {o}; give {group}= once "
                f"(to run both: gnnq -m {group}={seen[group].split('=', 1)[1]},{value})"
            )
        seen[group] = o


def drop_where_absent(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """gnnq's rule for ``++<group>.<key>=<value>`` (Hydra: set, or add): the key is set where the group's chosen
    option has it and left out where it does not, so that one sweep can give a method's setting to the points of
    that method only (``-m experiment=adaqp_vanilla,adaqp ++quantizer.assign_cycle=10``). Removes such keys from
    ``cfg``; returns the overrides left out (docs/runs.md "Sweeps"). A key no option of the group has is kept, so
    that validation refuses it as the typo it is."""
    registries, dropped = group_registries(), []
    for o in overrides:
        if not o.startswith("++") or o.startswith("+++") or "=" not in o:
            continue
        group, _, leaf = o[2:].split("=", 1)[0].partition(".")
        leaf = leaf.split(".", 1)[0]
        node = cfg.get(group) if group in registries else None
        if not leaf or not isinstance(node, DictConfig) or str(node.get("name")) not in registries[group]:
            continue
        registry = registries[group]
        some_option_has_it = any(leaf in {f.name for f in fields(registry.schema(n))} for n in registry.names())
        own = {f.name for f in fields(registry.schema(str(node.name)))}
        if some_option_has_it and leaf not in own and leaf in node:  # a key no option has stays: a typo, refused
            with open_dict(node):
                del node[leaf]
            dropped.append(o)
    return dropped


def shared_group_choices(
    overrides: list[str],
    points: list[tuple[list[str], DictConfig]],
    config_name: str = "config",
    config_dir: str | None = None,
) -> list[str]:
    """Group choices to add to a sweep's command line so that Hydra can compose its shared config.

    Hydra composes a multirun's own config from its overrides without the swept ones. Where a swept
    choice picks the group whose keys another override sets (``experiment=pdadmm_g_paper,pdadmm_g_q_code
    parallel.rho=1e-3``: the experiments choose parallel=admm, the shared config has parallel=sync,
    which has no rho), that fails. The fix is the group's choice that every point shares, named on
    the command line too (``parallel=admm``): those choices, none when the shared config composes as given.
    ConfigError, naming the key and what to do, where the points do not share it."""
    shared = outside_sweep(overrides)
    try:
        compose_config(shared, config_name, config_dir, check=False)
        return []
    except ConfigError as exc:
        failure = exc
    named = {o.split("=", 1)[0].lstrip("+~") for o in shared}
    groups = sorted(
        {o.split("=", 1)[0].lstrip("+~").split(".", 1)[0] for o in shared if "." in o.split("=", 1)[0]} - named
    )
    added = []
    for group in groups:
        choices = {str(cfg[group].get("name")) for _, cfg in points if isinstance(cfg.get(group), DictConfig)}
        if len(choices) == 1 and (CONF_DIR / group / f"{next(iter(choices))}.yaml").is_file():
            added.append(f"{group}={choices.pop()}")
    if added:
        try:
            compose_config(shared + added, config_name, config_dir, check=False)
            return added
        except ConfigError:
            pass
    raise ConfigError(
        f"{failure} (in the sweep's shared config: Hydra composes it without the swept values; where every point "
        "picks the same choice of that group, name it on the command line too, e.g. parallel=admm)"
    )


def compose_point(point: list[str], i: int, n: int, config_name: str, config_dir: str | None) -> DictConfig:
    try:
        return compose_config(point, config_name, config_dir)
    except ConfigError as exc:
        raise ConfigError(f"sweep point #{i} of {n} ({' '.join(point)}): {exc}{_plus_hint(exc, point)}") from None


def _plus_hint(exc: ConfigError, overrides: list[str]) -> str:
    """For a sweep's key that the chosen option of some point lacks: the ``++`` way to set it only where it exists."""
    for o in overrides:
        key = o.lstrip("+").split("=", 1)[0]
        if not o.startswith("++") and str(exc).startswith(f"{key}: no such key for"):
            return f"; to set it only in the sweep's points whose choice has it: ++{o.lstrip('+')}"
    return ""


def resolve_sweep(name: str) -> tuple[str, str]:
    """(config dir, config name) of a sweep given by name (shipped in sweeps/) or by the path of its .yaml file."""
    path = Path(name).expanduser()
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return str(path.resolve().parent), path.stem
    if (SWEEPS_DIR / f"{name}.yaml").is_file():
        return str(SWEEPS_DIR), name
    known = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml") if not p.name.endswith(".table.yaml"))
    raise ConfigError(f"sweep {name!r}: no such file in {SWEEPS_DIR} and not a .yaml path (known: {', '.join(known)})")


def check_config_name(config_name: str, config_dir: str | None) -> None:
    """ConfigError naming the configs there are when ``--config-name`` names none (in ``--config-dir``, or gnnq's
    own)."""
    where = Path(config_dir) if config_dir is not None else CONF_DIR
    if (
        config_name == "config"
        or (where / f"{config_name}.yaml").is_file()
        or (CONF_DIR / f"{config_name}.yaml").is_file()
    ):
        return
    known = sorted(p.stem for p in where.glob("*.yaml") if not p.name.endswith(".table.yaml"))
    raise ConfigError(
        f"--config-name {config_name}: no {config_name}.yaml in {where}; available: {', '.join(known) or 'none'}"
    )


def sweep_points(overrides: list[str], config_name: str = "config", config_dir: str | None = None) -> list[list[str]]:
    """The override list of every point a multirun would run: the sweep file's
    ``hydra.sweeper.params`` and the command line's sweeps (the command line wins per key)."""
    first = expand_sweep(overrides)[0]
    try:
        base = compose_config(first, config_name, config_dir)
    except ConfigError as exc:
        raise ConfigError(f"{exc}{_plus_hint(exc, first)}") from None
    file_params = {}
    if "hydra" in base:
        params = OmegaConf.select(base, "hydra.sweeper.params") or {}
        file_params = {str(k): str(v) for k, v in params.items()}
    cli_keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    return expand_sweep([f"{k}={v}" for k, v in file_params.items() if k not in cli_keys] + overrides)


def outside_sweep(overrides: list[str]) -> list[str]:
    """The overrides that are not sweeps: what Hydra composes a multirun's own config from."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return [o.input_line for o in parsed if not o.is_sweep_override()]


def _missing_option_message(exc: MissingConfigException, overrides: list[str]) -> str:
    missing = exc.missing_cfg_file or ""
    group, _, option = missing.rpartition("/")
    if group and exc.options:
        return f"{group}={option} is not a known option; choose one of: {', '.join(sorted(exc.options))}"
    return _first_line(str(exc))


def _composition_message(exc: BaseException) -> str:
    if isinstance(exc, OverrideParseException):  # Hydra's message names neither the override nor its key
        return f"cannot parse override {exc.override!r}: {_first_line(exc.message)}{_quoting_hint(exc.override)}"
    cause = exc
    while (cause.__cause__ or cause.__context__) is not None and not isinstance(cause, OmegaConfBaseException):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None) or ""
        msg = _first_line(getattr(cause, "msg", None) or str(cause))
        if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and key:
            choice = _choice_of(cause, key)
            if choice is not None:
                return choice
            allowed = _allowed_keys(key.rpartition(".")[0])
            if allowed:
                return f"{key}: no such key; allowed keys there: {', '.join(allowed)}"
            if allowed is None:  # a free-form dict (cluster.sbatch_extra): Hydra adds keys to it with +
                return f"{key}: a new key; add it with a leading +: +{key}=VALUE"
        return f"{key}: {msg}" if key else msg
    return _first_line(str(exc))


def _choice_of(cause: OmegaConfBaseException, key: str) -> str | None:
    """For a key not in a group's chosen option (dataset.num_nodes with dataset=cora): the message naming the
    option and its keys; None for other keys."""
    group, _, leaf = key.partition(".")
    registry = group_registries().get(group)
    if registry is None or "." in leaf:
        return None
    parent = getattr(cause, "parent_node", None)
    name = parent._get_node("name")._value() if isinstance(parent, DictConfig) and "name" in parent.keys() else None
    schema = getattr(cause, "object_type", None)
    if name not in registry or (schema is not None and registry.schema(name) is not schema):
        name = next((n for n in registry.names() if registry.schema(n) is schema), None)
    if name is None:
        return None
    return no_such_key_message(group, leaf, name, [f.name for f in fields(registry.schema(name))])


def _allowed_keys(parent: str) -> list[str] | None:
    """The schema's keys under ``parent``; None where it is a free-form dict, [] where the schema has none."""
    node, parts = Config, parent.split(".") if parent else []
    registry = group_registries().get(parts[0]) if parts else None
    if registry is not None and len(parts) > 1:  # below a group's key: the schema of a choice that has the key
        node = next(
            (registry.schema(n) for n in registry.names() if parts[1] in {f.name for f in fields(registry.schema(n))}),
            None,
        )
        if node is None:
            return []
        parts = parts[1:]
    for part in parts:
        match = [f for f in fields(node) if f.name == part]
        if not match:
            return []
        node = match[0].default_factory() if match[0].default_factory is not None else None  # type: ignore[misc]
        node = type(node) if node is not None else None
        if node is dict:
            return None
        if node is None or not is_dataclass(node):
            return []
    return [f.name for f in fields(node)]


# what Hydra's override grammar takes in an unquoted value besides letters and digits (hydra/grammar/OverrideLexer.g4)
_UNQUOTED = set("-+.$%_/@*:\\ =~")


def _quoting_hint(override: str) -> str:
    """How to pass a value Hydra's grammar does not take unquoted (non-ASCII letters, brackets, commas ...)."""
    key, eq, value = override.partition("=")
    plain = all(c.isascii() and (c.isalnum() or c in _UNQUOTED) for c in value)
    if not eq or not value or value[0] in "'\"[{(" or plain:
        return ""
    quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    hint = f'; quote the value for Hydra, e.g. "{key}={quoted}" (the whole argument in double quotes for the shell)'
    if key.lstrip("+") == "dataset.path":
        hint += ", or give the directory without quoting as GNNQ_FILES_PATH=<dir> in the environment"
    return hint


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
