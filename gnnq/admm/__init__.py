"""pdADMM-G and pdADMM-G-Q: layer-parallel ADMM training of graph-augmented MLPs."""
