"""The lab: one-off benchmark scripts whose outputs (with the exact command) are committed under results/.

Run from the checkout root as ``python -m benchmarks.<name> --help``; they import gnnq as any user would and
are not part of the wheel. ``gnnq-bench`` (repeated, interleaved sweeps against a baseline) is the product and
lives in ``gnnq/bench/``; the reliability catalogue and the GPU check are tests (``tests/reliability/``,
``tests/gpu/``).
"""
