"""The modelled cluster a trace is projected onto: hosts behind one switch, each with one uplink and one downlink.

Every host has an uplink and a downlink of ``link_gbit`` (each direction on its own), shared fairly by the messages in
flight on it; ranks of one host talk through ``intra_gbit``, shared by that host's local messages. ``latency_ms`` is
one way between two hosts. ``compute_speed`` divides every compute span (2: a device twice as fast as the one traced).
``goodput``: the share of a link's bandwidth that carries payload (TCP/IP headers take the rest: about 0.96 on the
emulated cluster's links, tests/e2e/test_emulated.py; 1 by default). ``duplex``: ``full`` (default: a host's uplink
and downlink are separate, as on a real NIC and switch port) or ``half`` (a host's sends and receives share one
link's bandwidth: what bidirectional TCP streams get through the emulated cluster's token buckets,
docs/projection.md#validation). ``comm_interference``: while any message of a host is in flight (sent, received or
between two of its ranks), that host's compute runs ``1 + comm_interference`` times slower, because its own cores move
the bytes (the emulated cluster's one-core hosts, whose kernel and gloo threads share the core with training: see
``EMULATED``); 0 (default) on hosts with cores and NICs to spare.

``EMULATED`` is gnnq's emulated cluster as the validation measured it (``--cluster emulated``, ``--recorded-cluster
emulated``): half-duplex links at 0.96 goodput and the fitted interference of a pinned one-core host.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from gnnq.errors import ConfigError

TOPOLOGIES = ("switch",)
DUPLEX = ("full", "half")
DEFAULT_INTRA_GBIT = 100.0  # ranks of one host: shared memory / loopback, far above a network link
# The emulated cluster's hosts and links (results/projection/validation: comm_interference fitted on pass 2's
# cross-bandwidth points, checked on pass 3's).
EMULATED = {"duplex": "half", "goodput": 0.96, "comm_interference": 2.0}
NAMED_MODELS = {"emulated": EMULATED}
# What a trace's own meta.json tells of the cluster it was recorded on (and compute_speed, 1 by definition there):
# recorded_cluster takes these from the trace, never from a --recorded-cluster model.
RECORDED_FIELDS = ("hosts", "ranks_per_host", "link_gbit", "latency_ms", "compute_speed")


@dataclass(frozen=True)
class Cluster:
    hosts: int
    ranks_per_host: int
    link_gbit: float
    latency_ms: float = 0.0
    intra_gbit: float = DEFAULT_INTRA_GBIT
    intra_latency_ms: float = 0.0
    compute_speed: float = 1.0
    topology: str = "switch"
    duplex: str = "full"
    goodput: float = 1.0
    comm_interference: float = 0.0

    def __post_init__(self):
        checks = (
            ("hosts", self.hosts >= 1, ">= 1"),
            ("ranks_per_host", self.ranks_per_host >= 1, ">= 1"),
            ("link_gbit", self.link_gbit > 0, "> 0"),
            ("latency_ms", self.latency_ms >= 0, ">= 0"),
            ("intra_gbit", self.intra_gbit > 0, "> 0"),
            ("intra_latency_ms", self.intra_latency_ms >= 0, ">= 0"),
            ("compute_speed", self.compute_speed > 0, "> 0"),
            ("goodput", 0 < self.goodput <= 1, "in (0, 1]"),
            ("comm_interference", self.comm_interference >= 0, ">= 0"),
        )
        for name, ok, allowed in checks:
            if not ok:
                raise ConfigError(f"cluster {name}={getattr(self, name)!r}: must be {allowed}")
        if self.duplex not in DUPLEX:
            raise ConfigError(f"cluster duplex={self.duplex!r}: allowed: {', '.join(DUPLEX)}")
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"cluster topology={self.topology!r}: allowed: {', '.join(TOPOLOGIES)}")

    @property
    def world_size(self) -> int:
        return self.hosts * self.ranks_per_host

    def rank_host(self) -> list[int]:
        """Ranks are numbered host by host, as gnnq numbers them."""
        return [r // self.ranks_per_host for r in range(self.world_size)]

    @property
    def link_Bps(self) -> float:
        """Payload bytes per second of a link: its bandwidth times ``goodput``."""
        return self.link_gbit * 1e9 / 8 * self.goodput

    @property
    def intra_Bps(self) -> float:
        return self.intra_gbit * 1e9 / 8

    def with_(self, **changes) -> "Cluster":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


def recorded_cluster(meta: dict, model: dict | None = None) -> Cluster:
    """The cluster a trace was recorded on, from its meta.json (a run without a shaped link: ConfigError); ``model``:
    the fields the trace cannot tell (duplex, goodput, comm_interference: e.g. ``EMULATED``). The recording ran at
    compute_speed 1 by definition, so a ``compute_speed`` in ``model`` is ignored."""
    c = meta.get("cluster") or {}
    if not c.get("link_mbit"):
        raise ConfigError(
            "the trace names no link bandwidth (cluster.link_mbit is null: a run on one machine's loopback); "
            "give the target cluster's --link-gbit to project it"
        )
    return Cluster(
        hosts=int(meta["hosts"]),
        ranks_per_host=int(meta["ranks_per_host"]),
        link_gbit=float(c["link_mbit"]) / 1000.0,
        latency_ms=float(c.get("latency_ms") or 0.0),
        **{k: v for k, v in (model or {}).items() if k not in RECORDED_FIELDS},
    )


def read_cluster_file(path: Path, flag: str = "--cluster") -> dict:
    """A small cluster file (JSON, or YAML's flat ``key: value`` lines): the Cluster fields it sets; or the name of a
    built-in model (``emulated``). ``flag``: the option that named it, for the error messages."""
    if str(path) in NAMED_MODELS:
        return dict(NAMED_MODELS[str(path)])
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(
            f"{flag} {path}: cannot read it ({exc.strerror or type(exc).__name__}); give a cluster file or a "
            f"built-in model: {', '.join(NAMED_MODELS)}"
        ) from None
    try:
        data = json.loads(text)
    except ValueError:
        data = _flat_yaml(text, f"{flag} {path}")
    if not isinstance(data, dict):
        raise ConfigError(f"{flag} {path}: must hold one mapping of cluster fields")
    allowed = {f.name for f in fields(Cluster)}
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{flag} {path}: unknown field {key!r}; allowed: {', '.join(sorted(allowed))}")
    return data


def _flat_yaml(text: str, where: str) -> dict:
    out: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ConfigError(f"{where}:{n}: expected 'key: value', got {line!r}")
        value = value.strip()
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out
