"""Emulated hosts: Linux network namespaces joined through veth pairs to a bridge, every link shaped with tc.

One run's topology, all of it inside namespaces gnnq creates (nothing is added to the root namespace):

    gnnq-<id>-h0  [gnnq0 10.213.0.10/24] --veth-- [h0] \
    gnnq-<id>-h1  [gnnq0 10.213.0.11/24] --veth-- [h1]  > br0 in gnnq-<id>-sw
    ...                                                /

Each host's link is shaped in both directions: a token bucket (tbf) at ``bandwidth_mbit`` on the host's
``gnnq0`` (upload) and on its switch port ``h<k>`` (download), where netem adds ``latency_ms``,
``jitter_ms`` and ``loss_pct`` when asked. A packet between two hosts thus crosses the sender's and the
receiver's links at the configured rate and is delayed (and may be lost) once.

Before anything is created, a state file ``STATE_DIR/<id>.json`` names the namespaces and the launcher
that owns them (PID and start time). Teardown deletes the namespaces (their veths, bridge and qdiscs go
with them) after stopping any process still inside, then the state file; it is idempotent. Every setup
first tears down what launchers that no longer exist left behind (``clean_stale``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gnnq.contract import EMULATED_MAX_HOSTS, LINK_PRESETS_MBIT
from gnnq.errors import LaunchError

PREFIX = "gnnq-"
STATE_DIR = Path("/run/gnnq-emulated")
HOST_IFNAME = "gnnq0"  # each host's interface, inside its namespace (GLOO_SOCKET_IFNAME)
BRIDGE = "br0"  # inside the switch namespace
SUBNET = "10.213.0"  # private, and only ever configured inside gnnq's own namespaces
FIRST_HOST_OCTET = 10  # two-digit last octets sort like host indices (torchrun orders nodes by address)
_NS_NAME = re.compile(rf"^{PREFIX}([0-9a-f]+)-(sw|h\d+)$")


@dataclass(frozen=True)
class LinkSpec:
    """One host's link to the switch, the same in both directions."""

    bandwidth_mbit: float
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    @classmethod
    def from_cluster(cls, cluster) -> "LinkSpec":
        """The link a validated ``cluster`` config asks for (a preset's bandwidth, or ``bandwidth_mbit``)."""
        bandwidth = cluster.bandwidth_mbit if cluster.link == "custom" else LINK_PRESETS_MBIT[cluster.link]
        return cls(float(bandwidth), float(cluster.latency_ms), float(cluster.jitter_ms), float(cluster.loss_pct))

    @property
    def needs_netem(self) -> bool:
        return self.latency_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0

    def describe(self) -> str:
        parts = [f"{self.bandwidth_mbit:g} Mbit/s"]
        if self.latency_ms or self.jitter_ms:
            parts.append(f"latency {self.latency_ms:g} ms" + (f" ± {self.jitter_ms:g} ms" if self.jitter_ms else ""))
        if self.loss_pct:
            parts.append(f"loss {self.loss_pct:g}%")
        return ", ".join(parts)


@dataclass(frozen=True)
class Topology:
    run_id: str
    hosts: int
    link: LinkSpec

    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.run_id}-sw"

    def host_ns(self, h: int) -> str:
        return f"{PREFIX}{self.run_id}-h{h}"

    def host_addr(self, h: int) -> str:
        return f"{SUBNET}.{FIRST_HOST_OCTET + h}"

    @property
    def namespaces(self) -> list[str]:
        return [self.host_ns(h) for h in range(self.hosts)] + [self.switch]

    @property
    def state_file(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"


def check_host() -> None:
    """A clear error when not root or when iproute2's ``ip`` or ``tc`` is missing."""
    if os.geteuid() != 0:
        raise LaunchError(
            "cluster=emulated creates network namespaces, veth pairs and tc qdiscs and needs root "
            f"(running as uid {os.geteuid()}); run gnnq as root, or use cluster=local"
        )
    missing = [name for name in ("ip", "tc") if shutil.which(name) is None]
    if missing:
        raise LaunchError(
            f"cluster=emulated needs {' and '.join(f'`{m}`' for m in missing)}, not found on PATH; "
            "install the iproute2 package (apt-get install iproute2)"
        )


def _run(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    path = shutil.which(tool)
    if path is None:
        check_host()  # names the missing package
    res = subprocess.run([path, *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise LaunchError(
            f"cluster=emulated setup failed: `{tool} {' '.join(args)}`: {res.stderr.strip() or res.returncode}"
        )
    return res


def _start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), so a reused PID is not taken for its owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _owner_alive(state: dict) -> bool:
    return _start_time(int(state.get("owner_pid", -1))) == state.get("owner_start")


def create(hosts: int, link: LinkSpec, run_id: str | None = None) -> Topology:
    """Build the topology for ``hosts`` hosts; idempotent for a given ``run_id`` (what exists is rebuilt).

    Tears down stale setups first, and its own partial setup if a step fails.
    """
    if not 1 <= hosts <= EMULATED_MAX_HOSTS:
        raise LaunchError(
            f"cluster.hosts={hosts} is not allowed with cluster=emulated; it must be in 1..{EMULATED_MAX_HOSTS}"
        )
    check_host()
    clean_stale()
    topo = Topology(run_id or secrets.token_hex(3), hosts, link)
    teardown(topo)  # a previous setup under this id, whole or partial
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state = {
        **asdict(topo),
        "namespaces": topo.namespaces,
        "owner_pid": os.getpid(),
        "owner_start": _start_time(os.getpid()),
    }
    tmp = topo.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(topo.state_file)  # written before anything exists, so a crash from here on is cleaned up later
    try:
        _build(topo)
    except BaseException:
        teardown(topo)
        raise
    return topo


def _build(topo: Topology) -> None:
    sw = topo.switch
    for ns in topo.namespaces:
        _run("ip", "netns", "add", ns)
        _run("ip", "-n", ns, "link", "set", "lo", "up")
    _run("ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "-n", sw, "link", "set", BRIDGE, "up")
    for h in range(topo.hosts):
        ns, port = topo.host_ns(h), f"h{h}"
        _run("ip", "-n", ns, "link", "add", HOST_IFNAME, "type", "veth", "peer", "name", port, "netns", sw)
        _run("ip", "-n", sw, "link", "set", port, "master", BRIDGE)
        _run("ip", "-n", sw, "link", "set", port, "up")
        _run("ip", "-n", ns, "addr", "add", f"{topo.host_addr(h)}/24", "dev", HOST_IFNAME)
        _run("ip", "-n", ns, "link", "set", HOST_IFNAME, "up")
        _shape(ns, HOST_IFNAME, topo.link, netem=False)
        _shape(sw, port, topo.link, netem=topo.link.needs_netem)


def tbf_args(bandwidth_mbit: float) -> list[str]:
    """Token bucket at ``bandwidth_mbit``: a burst of 2 ms at that rate (at least 32 KiB), packets queue up to 50 ms."""
    burst = max(32 * 1024, int(bandwidth_mbit * 1e6 / 8 * 0.002))
    return ["tbf", "rate", f"{bandwidth_mbit:g}mbit", "burst", str(burst), "latency", "50ms"]


def _shape(ns: str, dev: str, link: LinkSpec, netem: bool) -> None:
    if not netem:
        _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", *tbf_args(link.bandwidth_mbit))
        return
    args = ["netem", "delay", f"{link.latency_ms:g}ms"]
    if link.jitter_ms:
        args.append(f"{link.jitter_ms:g}ms")
    if link.loss_pct:
        args += ["loss", f"{link.loss_pct:g}%"]
    res = _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", *args, check=False)
    if res.returncode != 0 and "unknown" in res.stderr.lower():
        raise LaunchError(
            "cluster.latency_ms, cluster.jitter_ms and cluster.loss_pct need tc's netem qdisc, which this kernel "
            "lacks (CONFIG_NET_SCH_NETEM); set them to 0 to shape bandwidth only"
        )
    if res.returncode != 0:
        raise LaunchError(
            f"cluster=emulated setup failed: `tc qdisc add dev {dev} root netem ...`: {res.stderr.strip()}"
        )
    _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf_args(link.bandwidth_mbit))


def list_namespaces() -> list[str]:
    res = _run("ip", "netns", "list")
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def pids_in(ns: str) -> list[int]:
    res = _run("ip", "netns", "pids", ns, check=False)  # empty once the namespace is gone
    return [int(p) for p in res.stdout.split()]


def signal_namespaces(namespaces: list[str], sig: int) -> int:
    """Send ``sig`` to every process inside ``namespaces``; returns how many were signalled."""
    count = 0
    for ns in namespaces:
        for pid in pids_in(ns):
            try:
                os.kill(pid, sig)
                count += 1
            except ProcessLookupError:
                pass
    return count


def stop_processes(namespaces: list[str], grace_s: float = 0.0) -> None:
    """SIGTERM everything inside ``namespaces``, wait up to ``grace_s`` for it to exit, then SIGKILL what is left."""
    if grace_s > 0 and signal_namespaces(namespaces, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(pids_in(ns) for ns in namespaces):
            time.sleep(0.1)
    deadline = time.monotonic() + 10
    while signal_namespaces(namespaces, signal.SIGKILL) and time.monotonic() < deadline:
        time.sleep(0.05)  # a killed process leaves the namespace once it is reaped


def teardown(topo: Topology | None = None, *, run_id: str | None = None, namespaces: list[str] | None = None) -> None:
    """Remove one run's namespaces (and with them its veths, bridge and qdiscs) and its state file. Idempotent."""
    run_id = topo.run_id if topo else run_id
    names = topo.namespaces if topo else list(namespaces or [])
    existing = set(list_namespaces())
    names = [ns for ns in names if ns in existing]
    stop_processes(names)
    for ns in names:
        res = _run("ip", "netns", "del", ns, check=False)
        if res.returncode != 0 and ns in list_namespaces():
            raise LaunchError(f"cluster=emulated teardown could not delete namespace {ns}: {res.stderr.strip()}")
    if run_id:
        (STATE_DIR / f"{run_id}.json").unlink(missing_ok=True)
        (STATE_DIR / f"{run_id}.tmp").unlink(missing_ok=True)


def clean_stale() -> list[str]:
    """Tear down every gnnq setup whose launcher is gone; returns the run ids cleaned.

    A gnnq-named namespace that no state file claims is stale too: a state file is always written
    before its namespaces and removed after them. Namespaces are listed before the state files are
    read, so a setup starting meanwhile is never taken for stale.
    """
    present = {}
    for ns in list_namespaces():
        m = _NS_NAME.match(ns)
        if m:
            present.setdefault(m.group(1), []).append(ns)
    states = {}
    for path in STATE_DIR.glob("*.json") if STATE_DIR.is_dir() else []:
        try:
            states[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            states[path.stem] = {}  # unreadable: its owner died while writing it
    cleaned = []
    for run_id in sorted(set(present) | set(states)):
        state = states.get(run_id)
        if state is not None and _owner_alive(state):
            continue
        teardown(
            run_id=run_id, namespaces=sorted(set(present.get(run_id, [])) | set((state or {}).get("namespaces", [])))
        )
        cleaned.append(run_id)
    return cleaned
