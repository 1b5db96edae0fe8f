"""``gnnq-bench project``: replay the traced timeline of a run on a modelled cluster.

``trace.py`` reads and checks a run's ``trace/`` (docs/projection.md: format version 1), ``timeline.py`` turns it
into each rank's sequence of operations, ``cluster.py`` is the modelled cluster, ``engine.py`` the analytical
replay (compute, messages with their real dependencies, fair-shared links, ring all-reduce), ``simgrid_engine.py``
the same replay on SimGrid (evaluated against it), ``scaling.py`` the timelines of more hosts (parts from
gnnq's own partitioner), ``command.py`` the command and ``outputs.py`` its table, files and heatmap.
Reads files only: it never starts a rank.
"""
