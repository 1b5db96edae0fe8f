"""Benchmarks whose outputs (with the exact command) are committed under results/."""
