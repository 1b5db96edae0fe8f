"""A private Slurm cluster on this machine for the tests: munged, slurmctld and two slurmd.

Debian's packages (``apt-get install slurmctld slurmd slurm-client munge``) run here as root with a
config of their own in a temporary directory (SLURM_CONF): no cgroups, no accounting database.
The two slurmd are two nodes of one machine, named after this host and ``localhost`` (both resolve
to this machine), each with all its CPUs, so a job can span two nodes. Every daemon runs in the
foreground as a child of the test process and is stopped by its own pid.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo")


def missing_reason() -> str | None:
    """Why a private Slurm cannot run here, or None."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return (
            f"Slurm/munge not installed (missing {', '.join(missing)}; Debian: apt-get install slurmctld slurmd "
            "slurm-client munge)"
        )
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_names() -> list[str]:
    """This host's short name (when it resolves) and localhost: two names for nodes of this machine."""
    host = socket.gethostname().split(".")[0]
    try:
        socket.gethostbyname(host)
    except OSError:
        return ["localhost"]
    return [host, "localhost"] if host != "localhost" else ["localhost"]


class PrivateSlurm:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.nodes = node_names()
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def slurmd_log(self, node: str) -> Path:
        return self.root / f"slurmd-{node}.log"

    def start(self, timeout_s: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # munged refuses a socket directory others may write to
        (self.root / "state").mkdir(exist_ok=True)
        for node in self.nodes:
            (self.root / "spool" / node).mkdir(parents=True, exist_ok=True)
        key, sock = self.root / "munge.key", self.root / "munge.sock"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}", "--force"], check=True, capture_output=True)
        self._write_conf(sock)
        self._spawn(
            [
                "munged",
                "--foreground",
                f"--socket={sock}",
                f"--key-file={key}",
                f"--pid-file={self.root / 'munged.pid'}",
                f"--seed-file={self.root / 'munged.seed'}",
                f"--log-file={self.root / 'munged.log'}",
            ]
        )
        self._wait(lambda: sock.exists(), timeout_s, "munged did not create its socket")
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for node in self.nodes:
            self._spawn(["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        self._wait(self._all_idle, timeout_s, "the Slurm nodes did not come up idle")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def scontrol(self, *args: str) -> str:
        return subprocess.run(
            ["scontrol", *args], env=self.env, capture_output=True, text=True, check=True, timeout=60
        ).stdout

    def job_info(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as key=value pairs (Slurm keeps a finished job there for MinJobAge, 300 s)."""
        return dict(
            tok.split("=", 1) for tok in self.scontrol("show", "job", "--oneliner", job_id).split() if "=" in tok
        )

    def _all_idle(self) -> bool:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env, capture_output=True, text=True, timeout=30
        )
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return sorted(states) == sorted(self.nodes) and all(s == "idle" for s in states.values())

    def _spawn(self, cmd: list[str]) -> None:
        log = open(self.root / f"{Path(cmd[0]).name}-{len(self.procs)}.out", "w")
        self.procs.append(
            subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        )
        log.close()

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "; ".join(
                    f"{p.name}: {p.read_text()[-500:]}" for p in sorted(self.root.glob("*.out")) if p.stat().st_size
                )
                raise RuntimeError(f"{what} (exited: {dead or 'none'}; {logs})")
            time.sleep(0.5)

    def _write_conf(self, munge_socket: Path) -> None:
        cpus = os.cpu_count() or 1
        nodes = "\n".join(
            f"NodeName={n} NodeAddr=127.0.0.1 Port={_free_port()} CPUs={cpus} RealMemory=1000 State=UNKNOWN"
            for n in self.nodes
        )
        r = self.root
        self.conf.write_text(f"""\
ClusterName=gnnqtest
SlurmctldHost={socket.gethostname().split(".")[0]}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={r / "state"}
SlurmdSpoolDir={r / "spool"}/%n
SlurmctldPidFile={r / "slurmctld.pid"}
SlurmdPidFile={r / "slurmd-%n.pid"}
SlurmctldLogFile={r / "slurmctld.log"}
SlurmdLogFile={r / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
{nodes}
PartitionName=debug Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE State=UP
""")
