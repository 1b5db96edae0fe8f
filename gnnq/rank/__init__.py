"""The rank process gnnq (cluster=local) or torchrun starts: ``python -m gnnq.rank --run-dir D --parts P``
(gnnq.rank.__main__).

It reads the run's config, joins the process group, runs the trainer the config names and hands the
result, its errors and its heartbeat to the launcher through the files gnnq.contract names.
"""
