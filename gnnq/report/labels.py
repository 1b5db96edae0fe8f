"""What to call a configuration in legends and leaderboards: the table spec's row label, else the
method its strategy and quantizer make, in the methods' own spelling (``PipeGCN``, ``AdaQP``, ``Vanilla``,
whether or not a preset such as ``experiment=adaqp`` chose it); then, only where several configurations
share that name, what tells them apart: their method presets (``PipeGCN (pipegcn_gnnq)``) and overrides
(``uniform quantizer.bits=4``)."""

from __future__ import annotations

from gnnq.config.registry import PARALLEL
from gnnq.report.aggregate import Group
from gnnq.report.overrides import presets
from gnnq.report.tables import _matches

# (parallel, quantizer) -> the method's name (docs/methods.md): each parallel choice's ``labels``
METHOD_NAMES = {(c.name, quantizer): label for c in PARALLEL.choices() for quantizer, label in c.labels.items()}
METHOD_GROUPS = ("parallel", "quantizer")


def spec_label(group: Group, specs: list[dict]) -> str | None:
    """The label of the first table-spec row that the configuration's runs match."""
    record = group.runs[0][1] if group.runs else None
    for spec in specs:
        for row in spec["rows"]:
            if record is not None and _matches(record, row.get("match")):
                return str(row["label"])
    return None


def preset_method(group: Group) -> str | None:
    """The ``experiment=`` preset the configuration is written with, where that preset picks a method."""
    first = group.overrides[0] if group.overrides else ""
    name = first.removeprefix("experiment=") if first.startswith("experiment=") else None
    preset = presets().get(name) if name else None
    return name if preset and set(METHOD_GROUPS) & set(preset.choices) else None


def _preset(group: Group) -> str | None:
    """The ``experiment=`` preset the configuration is written with, if any."""
    return next((o.removeprefix("experiment=") for o in group.overrides if o.startswith("experiment=")), None)


def builtin_method(group: Group) -> str:
    """The method's name; a fixed-width code with its width (``uniform 4-bit``, ``AdaQP-p + uniform 2-bit``)."""
    config = group.runs[0][1]["config"] if group.runs else {}
    names = tuple((config.get(g) or {}).get("name", "?") for g in METHOD_GROUPS)
    name = METHOD_NAMES.get(names, " + ".join(names))
    bits = (config.get("quantizer") or {}).get("bits")
    return f"{name} {bits}-bit" if name.endswith("uniform") and isinstance(bits, int) else name


def method_labels(groups: list[Group], specs: list[dict] = ()) -> list[str]:
    """One label per configuration, unique among ``groups`` where their overrides differ."""
    names = [spec_label(g, list(specs)) or builtin_method(g) for g in groups]
    labels = []
    for g, name in zip(groups, names):
        peers = [o for o, n in zip(groups, names) if n == name]
        if len(peers) == 1:
            labels.append(name)
            continue
        common = set.intersection(*(set(p.overrides) for p in peers))
        extra = [o for o in g.overrides if o not in common and not o.startswith("experiment=")]
        preset = _preset(g)
        if preset and len({_preset(p) for p in peers}) > 1:
            extra.insert(0, f"({preset})")
        labels.append(" ".join([name, *extra]))
    return labels
