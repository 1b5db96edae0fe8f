#!/usr/bin/env bash
# Traced validation runs for the projection (issue 33): 5 methods on the emulated cluster, 2 hosts (one pinned
# core each) at 100 Mbit/s, 1 Gbit/s and 10 Gbit/s, and 4 hosts (unpinned: 4 hosts on 2 cores) at 1 Gbit/s.
# Run from the repository root (root and iproute2 needed):
#   bash benchmarks/trace_validation_runs.sh [SUFFIX [SETTING...]]
# SUFFIX is appended to each setting's folder under results/projection/validation/runs/ (a repeat: -rep2);
# SETTINGs: hosts2-100mbit hosts2-1gbit hosts2-10gbit hosts4-1gbit (default: all). The 1-minute load average
# is sampled every 20 s into results/projection/validation/runs/loadavg<SUFFIX>.log.
# Another graph or folder: DATA="dataset=products-like" OUT=results/projection/products_like bash ... (the runs land
# in $OUT/runs/).
set -u
OUT=${OUT:-results/projection/validation}
DATA=${DATA:-dataset=reddit-like dataset.num_nodes=20000}
SUFFIX=${1:-}
shift || true
SETTINGS=${*:-hosts2-100mbit hosts2-1gbit hosts2-10gbit hosts4-1gbit}
METHODS=experiment=adaqp_vanilla,adaqp,adaqp_q,pipegcn,bnsgcn
COMMON="$DATA trainer.epochs=5 trainer.eval_every=5 trainer.trace=true logger=none"
declare -A CLUSTER=(
  [hosts2-100mbit]="cluster.hosts=2 cluster.pin_cores=on cluster.link=custom cluster.bandwidth_mbit=100"
  [hosts2-1gbit]="cluster.hosts=2 cluster.pin_cores=on cluster.link=1gbit"
  [hosts2-10gbit]="cluster.hosts=2 cluster.pin_cores=on cluster.link=10gbit"
  [hosts4-1gbit]="cluster.hosts=4 cluster.pin_cores=off cluster.link=1gbit"
)
mkdir -p "$OUT/runs"
(while true; do echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 20; done) > "$OUT/runs/loadavg$SUFFIX.log" &
SAMPLER=$!
for name in $SETTINGS; do
  echo "== $name$SUFFIX: $(date -u +%H:%M:%S)"
  # shellcheck disable=SC2086  # the cluster overrides and COMMON are word lists
  gnnq -m "$METHODS" cluster=emulated ${CLUSTER[$name]} $COMMON hydra.sweep.dir="$OUT/runs/$name$SUFFIX"
done
echo "== done: $(date -u +%H:%M:%S)"
kill "$SAMPLER"
find "$OUT/runs" -name lock -path '*/.gnnq/*' -delete  # the run dirs' claim markers: nothing holds them now
