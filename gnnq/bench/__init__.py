"""gnnq-bench, the product: a sweep's points side by side, interleaved and repeated, against a baseline.

``harness.py`` is the command, ``compare.py`` its statistics, ``bench_report.py`` its outputs and
``machine.py`` the machine description they carry. One-off benchmark scripts live in the top-level
``benchmarks/`` package (not shipped in the wheel).
"""
