"""The parts of the graph for a host count that was not traced, and the timelines scaled to them.

``--graph grow`` (default) keeps the recorded nodes per rank: the graph of K ranks is the run's generator
(``dataset=synthetic``: the Reddit-like and products-like presets) with num_nodes * K / W nodes. ``same`` splits
the recorded graph into K parts. Parts come from gnnq's own partitioner (the run's partitioner and seed, real METIS)
while K <= --max-real-parts and the graph has at most --max-real-edges edges; beyond, from partstats.extrapolate,
fitted on the real partitions of 2, 4, 8, ... parts that fit those limits (rows labelled "extrapolated").
"""

from __future__ import annotations

from pathlib import Path

from gnnq.errors import ConfigError
from gnnq.projection.cluster import Cluster
from gnnq.projection.partstats import extrapolate, part_stats
from gnnq.projection.scaling import fit_layer_model, scaled_timelines
from gnnq.projection.timeline import Op
from gnnq.projection.trace import Trace


class Scaler:
    def __init__(self, args):
        self.mode = args.graph
        self.max_parts = args.max_real_parts
        self.max_edges = args.max_real_edges
        self.data = args.data
        self.notes: list[str] = []

    def timelines(self, trace: Trace, recorded: list[list[Op]], cluster: Cluster) -> tuple[list[list[Op]], str]:
        cfg = load_run_config(trace.run_dir)
        ds, part = dict(cfg["dataset"]), cfg.get("partitioner") or {"name": "metis", "seed": 0}
        w, k = trace.world_size, cluster.world_size
        old = self._stats(ds, part, w, w)
        self._check_recorded(trace, old)
        new, label = self._for(ds, part, w, k)
        widths = list(trace.meta["model"]["widths"])
        model = fit_layer_model(recorded, trace.num_epochs, old["parts"], widths)
        if not model.fitted:
            self.notes.append(f"{trace.run_dir}: the layer compute model could not be fitted; equal weights used")
        return scaled_timelines(recorded, old["parts"], new["parts"], widths, model), label

    def _graph_for(self, ds: dict, w: int, k: int) -> dict:
        if self.mode == "same" or k == w:
            return ds
        if ds.get("name") != "synthetic":
            raise ConfigError(
                f"--graph grow needs a generated graph (dataset=synthetic, e.g. reddit-like); "
                f"this run's is {ds.get('name')!r}: use --graph same"
            )
        return {**ds, "num_nodes": int(round(ds["num_nodes"] * k / w))}

    def _edges_estimate(self, ds: dict, w: int, k: int, known: dict | None = None) -> float:
        g = self._graph_for(ds, w, k)
        if g.get("name") == "synthetic":
            return float(g["num_nodes"]) * float(g.get("avg_degree", 12.0))
        if known:
            return known[max(known)]["num_edges"]
        return 0.0

    def _real_ok(self, ds: dict, w: int, k: int) -> bool:
        return k <= self.max_parts and self._edges_estimate(ds, w, k) <= self.max_edges

    def _stats(self, ds: dict, part: dict, w: int, k: int) -> dict:
        from omegaconf import OmegaConf

        from gnnq.data.registry import data_root

        g = self._graph_for(ds, w, k)
        root = Path(self.data) if self.data else data_root(OmegaConf.create(g))
        return part_stats(g, part.get("name", "metis"), int(part.get("seed", 0)), k, root)

    def _for(self, ds: dict, part: dict, w: int, k: int) -> tuple[dict, str]:
        if self._real_ok(ds, w, k):
            return self._stats(ds, part, w, k), f"real ({k} parts)"
        known = {}
        kk = 2
        while self._real_ok(ds, w, kk):
            known[kk] = self._stats(ds, part, w, kk)
            kk *= 2
        if not known:
            raise ConfigError(
                f"cannot partition even 2 parts within --max-real-edges {self.max_edges:g}: "
                f"raise it to project {k} ranks"
            )
        last = known[max(known)]
        n = self._graph_for(ds, w, k).get("num_nodes") or last["num_nodes"]
        e = last["num_edges"] / last["num_nodes"] * n
        out = extrapolate(known, k, int(n), int(e))
        rule = out["extrapolated"]
        self.notes.append(
            f"{k} parts extrapolated from real partitions of {sorted(known)} parts: 1 - cut fraction = "
            f"{rule['alpha']:.3g} * K^-{rule['beta']:.3g} (cut fraction at {k}: {rule['phi']:.3f}), "
            f"gamma {rule['gamma']:.3g}"
        )
        return out, "extrapolated"

    def _check_recorded(self, trace: Trace, old: dict) -> None:
        recorded = (trace.meta.get("graph") or {}).get("parts") or []
        mine = [p["inner_nodes"] for p in old["parts"]]
        theirs = [p.get("inner_nodes") for p in recorded]
        if theirs and theirs != mine:
            self.notes.append(
                f"{trace.run_dir}: the trace's parts ({theirs} inner nodes) differ from gnnq's partition of the same "
                f"graph here ({mine}); the ratios use the latter"
            )


def load_run_config(run_dir: Path) -> dict:
    """The run's config.yaml (its dataset and partitioner rebuild the graph for another host count)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no config.yaml (needed to rebuild the graph for another host count)")
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
