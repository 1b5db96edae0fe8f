"""Compose and validate configs before any rank starts, turning every error into one line."""

from __future__ import annotations

import importlib.util
import itertools
from dataclasses import fields, is_dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

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
    finally:
        GlobalHydra.instance().clear()
    if not check:
        return cfg
    try:
        validate(cfg)  # reads every value: missing values and broken interpolations surface here
    except OmegaConfBaseException as exc:
        raise ConfigError(_composition_message(exc)) from None
    return cfg


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
        raise ConfigError(f"sweep point #{i} of {n} ({' '.join(point)}): {exc}") from None


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
    base = compose_config(expand_sweep(overrides)[0], config_name, config_dir)
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
        return f"cannot parse override {exc.override!r}: {_first_line(exc.message)}"
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


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
