"""What one rank holds, phase by phase: load its part, build the model's operator, fetch the input halo, one
forward and backward of the model (the halo rows of hidden layers drawn locally: no peers needed).

    python -m benchmarks.products_scale.rank_phases PARTS_DIR [RANK] [HIDDEN] [LAYERS]

PARTS_DIR: a partition cache entry (GNNQ_DATA/parts/<key>). Prints, for each phase, the resident memory after
it and the phase's own peak above the memory before it (VmHWM, reset between phases through /proc/self/clear_refs).
Without gloo (a rank has about 220 MiB more). The forward concatenates [inner; halo] rows at every layer, as the
sync strategy did before it kept [x; x_halo] as one buffer: the operator phase is the one to compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from gnnq.data.part_cache import load_part
from gnnq.models.gnn import GNN
from gnnq.models.graph_ops import local_graph_for
from gnnq.track.process_memory import peak_rss_mib, rss_mib


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def phase(name: str, before: float) -> float:
    now = rss_mib()
    print(
        f"{name:<34} rss {now:8.0f} MiB   phase peak +{peak_rss_mib() - before:7.0f} MiB   held "
        f"+{now - before:7.0f} MiB",
        flush=True,
    )
    reset_peak()
    return now


def main() -> None:
    entry = Path(sys.argv[1])
    rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    layers = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    torch.set_num_threads(1)
    reset_peak()
    r = phase("python + torch + gnnq", 0.0)
    part = load_part(entry, rank)
    e = part.indices.numel()
    print(f"part {rank}: inner {part.num_inner:,}, halo {part.num_halo:,}, in-edges {e:,}, features {part.x.shape[1]}")
    r = phase("load_part", r)
    graph = local_graph_for("gcn", part)
    r = phase("operator (gcn_graph)", r)
    x_halo = torch.randn(part.num_halo, part.x.shape[1])
    r = phase("input halo rows (fetch_static)", r)
    model = GNN("gcn", part.x.shape[1], hidden, part.num_classes, layers, 0.5, "layer")
    buffers = {}

    def propagate(layer: int, h: torch.Tensor) -> torch.Tensor:
        if layer == 0:
            return graph.aggregate(torch.cat([h, x_halo]))
        full = buffers.setdefault(layer, torch.empty(part.num_inner + part.num_halo, h.shape[1]))
        full[part.num_inner :].normal_()
        return graph.aggregate(torch.cat([h, full[part.num_inner :]]))

    model.train()
    logits = model(part.x, propagate)
    loss = torch.nn.functional.cross_entropy(logits[part.train_mask], part.y[part.train_mask])
    r = phase(f"forward (GCN {layers} x {hidden})", r)
    loss.backward()
    del logits, loss
    r = phase("backward", r)


if __name__ == "__main__":
    main()
