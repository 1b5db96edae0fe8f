"""Products scale (issue 21): memory of the launcher's data path and of one rank, phase by phase, at up to 2.45M
nodes; outputs and commands in results/products_scale/README.md. Each size runs once: no ``gnnq-bench`` sweep."""
