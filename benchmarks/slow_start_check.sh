#!/bin/bash
# Does TCP slow start after idle decide the emulated link's rate (issue 33 validation)? Vanilla and PipeGCN at
# 100 Mbit/s on 2 pinned emulated hosts, with net.ipv4.tcp_slow_start_after_idle set to $2 inside the hosts'
# namespaces (0: set by a watcher as soon as they exist). Run from the repository root (root, iproute2):
#   bash benchmarks/slow_start_check.sh off 0; bash benchmarks/slow_start_check.sh on 1
# $1: label, $2: 0|1 (tcp_slow_start_after_idle inside the emulated hosts)
W=""
if [ "$2" = 0 ]; then
  (while true; do for ns in $(ip netns list | awk '/gnnq/{print $1}'); do ip netns exec $ns sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null; done; sleep 0.2; done) &
  W=$!
fi
gnnq -m experiment=adaqp_vanilla,pipegcn cluster=emulated cluster.hosts=2 cluster.pin_cores=on cluster.link=custom cluster.bandwidth_mbit=100 dataset=reddit-like dataset.num_nodes=20000 trainer.epochs=5 trainer.eval_every=5 logger=none hydra.sweep.dir=results/projection/validation/slow_start_check/$1 > /tmp/slow_start_check-$1.log 2>&1
[ -n "$W" ] && kill $W
