"""cluster=emulated on real namespaces, veths, tc and torchrun: shaped throughput, full runs, failures, no leftovers.

These tests need root and iproute2; elsewhere they skip, unless GNNQ_REQUIRE_NETNS=1 (CI) makes that a failure.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_emulated.py`.
"""

from __future__ import annotations

import pytest

from gnnq.config.compose import compose_config
from gnnq.errors import ConfigError
from gnnq.launch import netns
from gnnq.launch.cores import pinned_command, plan_host_cores


@pytest.mark.parametrize(
    "args, needles",
    [
        (["cluster.link=custom"], ["cluster.bandwidth_mbit=None", "> 0"]),
        (["cluster.link=10gbit", "cluster.bandwidth_mbit=50"], ["cluster.bandwidth_mbit=50", "custom"]),
        (["cluster.link=2gbit"], ["cluster.link", "1gbit, 10gbit, 25gbit, custom"]),
        (["cluster.latency_ms=0", "cluster.jitter_ms=1"], ["cluster.jitter_ms", "latency"]),
        (["cluster.loss_pct=100"], ["cluster.loss_pct", "< 100"]),
        (["cluster.hosts=65"], ["cluster.hosts=65", "<= 64"]),
        (["cluster.backend=nccl"], ["cluster.backend=nccl", "gloo"]),
        (["cluster.pin_cores=yes"], ["cluster.pin_cores", "auto, on, off"]),
    ],
)
def test_bad_emulated_config_names_the_key(args, needles):
    with pytest.raises(ConfigError) as excinfo:
        compose_config(["cluster=emulated", *args])
    for needle in needles:
        assert needle in str(excinfo.value), str(excinfo.value)


def test_host_cores_are_pinned_when_there_are_enough_and_marked_oversubscribed_when_not():
    two = plan_host_cores(2, 1, "auto", cores=[0, 1])
    assert (two.pinned, two.host_cpus, two.cores_per_host, two.threads_per_rank, two.oversubscribed) == (
        True,
        [[0], [1]],
        1.0,
        1,
        False,
    )
    uneven = plan_host_cores(2, 1, "auto", cores=[4, 5, 6])
    assert uneven.host_cpus == [[4, 5], [6]] and uneven.cores_per_host == 1.0  # the smallest host's share
    assert plan_host_cores(2, 2, "auto", cores=[0, 1]).oversubscribed  # two ranks of a host on its one core
    four = plan_host_cores(4, 1, "auto", cores=[0, 1])
    assert (four.pinned, four.host_cpus, four.cores_per_host, four.oversubscribed) == (False, None, 0.5, True)
    off = plan_host_cores(2, 1, "off", cores=[0, 1, 2, 3])
    assert (off.pinned, off.cores_per_host, off.threads_per_rank, off.oversubscribed) == (False, 2.0, 2, False)
    assert plan_host_cores(
        2, 1, "auto", threads_per_rank=3, cores=[0, 1]
    ).oversubscribed  # cluster.threads_per_rank wins
    with pytest.raises(ConfigError, match=r"cluster.pin_cores=on is not allowed with cluster.hosts=4 on 2 usable core"):
        plan_host_cores(4, 1, "on", cores=[0, 1])
    assert pinned_command([2, 3], ["torchrun"]) == ["taskset", "--cpu-list", "2,3", "torchrun"]


def test_emulated_config_defaults():
    cfg = compose_config(["cluster=emulated"])
    c = cfg.cluster
    assert (c.name, c.hosts, c.nproc, c.link, c.backend, c.pin_cores) == ("emulated", 2, 1, "1gbit", "gloo", "auto")
    assert netns.LinkSpec.from_cluster(c) == netns.LinkSpec(1000.0)
    custom = compose_config(
        ["cluster=emulated", "cluster.link=custom", "cluster.bandwidth_mbit=40", "cluster.latency_ms=2"]
    ).cluster
    assert netns.LinkSpec.from_cluster(custom) == netns.LinkSpec(40.0, latency_ms=2.0)
