"""What tuning may change, per method: additive metadata beside the registries (gnnq/config/registry.py), keyed by
each registry entry's name, so that every parallel strategy and codec family declares the knobs a tuner searches.

A space is a mapping of config keys to Hydra's Optuna-sweeper sweep syntax (``interval(a, b)``, ``tag(log,
interval(a, b))``, ``choice(a, b)``, ``range(a, b)``): the overrides ``gnnq -m hydra/sweeper=optuna`` takes
(gnnq.bench.tune puts them on its command line). A method's space is the common one (learning rate, dropout, weight
decay) plus its strategy's and its codec's own knobs. ``tests/unit/test_search_space.py`` fails for a registry entry
without a space here, and for a key that is not in the entry's config.
"""

from __future__ import annotations

# Every full-graph and mini-batch method: the optimizer and the model's regularization.
COMMON = {
    "trainer.lr": "tag(log, interval(0.001, 0.05))",
    "model.dropout": "interval(0.0, 0.6)",
    "trainer.weight_decay": "choice(0.0, 0.00001, 0.0001, 0.0005)",
}
# pdADMM-G trains a GA-MLP by ADMM: no learning rate or dropout; weight_decay is its mu on ||W||^2.
ADMM_COMMON = {"trainer.weight_decay": "choice(0.0, 0.00001, 0.0001)"}

# parallel=<name> -> its own knobs (PARALLEL's entries).
PARALLEL_SPACES: dict[str, dict[str, str]] = {
    "sync": {},  # Vanilla: nothing of its own
    "overlap": {},  # AdaQP-p: the split is a fidelity choice, not a knob to tune
    "stale": {"parallel.momentum": "choice(0.0, 0.5, 0.9, 0.95)"},  # PipeGCN's smoothing (0: none)
    "sampling": {"parallel.sampling_rate": "choice(0.05, 0.1, 0.2, 0.5)"},  # BNS-GCN's boundary sample rate
    "sancus": {"parallel.threshold": "interval(0.01, 0.5)", "parallel.max_staleness": "range(1, 9)"},
    # mini-batch's batch size and fan-out (one value for every layer: a list, which the sweeper passes as its text)
    "minibatch": {"parallel.batch_size": "choice(256, 512, 1024, 2048)", "parallel.fanouts": "choice([5], [10], [25])"},
    "admm": {"parallel.rho": "tag(log, interval(0.0001, 10.0))"},
    "tensor3d": {},  # Plexus: the grid changes where work runs, not what is computed
    "pipeqs": {"parallel.threshold": "interval(0.01, 0.5)", "parallel.max_staleness": "range(0, 5)"},  # E, bound
    "sylvie": {"parallel.base_bits": "choice(1, 2, 4)"},  # the starting width
}
# Strategies whose common knobs are not COMMON's.
OWN_COMMON = {"admm": ADMM_COMMON}
# quantizer=<name> -> its own knobs (QUANTIZERS' entries).
QUANTIZER_SPACES: dict[str, dict[str, str]] = {
    "fp32": {},
    "uniform": {"quantizer.bits": "choice(2, 4, 8)"},
    "adaptive": {"quantizer.assign_cycle": "choice(2, 5, 10)", "quantizer.variance_weight": "interval(0.1, 0.9)"},
    "grid": {"quantizer.grid_levels": "choice(16, 64, 256)"},
}


def search_space(parallel: str, quantizer: str) -> dict[str, str]:
    """The space of the method ``parallel=<parallel> quantizer=<quantizer>``: common keys, then the strategy's and the
    codec's own; KeyError naming the registry entry that declares none."""
    for name, spaces, group in ((parallel, PARALLEL_SPACES, "parallel"), (quantizer, QUANTIZER_SPACES, "quantizer")):
        if name not in spaces:
            raise KeyError(f"{group}={name} declares no search space in gnnq/config/search_space.py")
    common = OWN_COMMON.get(parallel, COMMON)
    return {**common, **PARALLEL_SPACES[parallel], **QUANTIZER_SPACES[quantizer]}


def overrides(space: dict[str, str]) -> list[str]:
    """The space as command-line sweep overrides for Hydra's Optuna sweeper."""
    return [f"{key}={value}" for key, value in space.items()]
