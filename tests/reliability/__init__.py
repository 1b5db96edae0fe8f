"""The reliability catalogue: bad inputs, bad places, faults and resource cases, each run through the real
``gnnq`` command line in its own temporary directory, with its expected exit code, error line and record
status, and the global checks after every case (records lost, orphan processes, secrets written).

    python -m tests.reliability --out results/reliability [--only REGEX] [--list] [--keep]

Under pytest every case is one test, ``tests/reliability/test_catalogue.py::test_case[family/name]``, marked
``catalogue``: the whole catalogue takes about 23 minutes, so the default selection leaves it out
(``pytest -m catalogue tests/reliability`` runs it; ``tests/test_reliability.py`` runs a sample by default).

``case.py`` says what a case is, ``context.py`` gives a case its directories, environment and ways to run
gnnq, ``procs.py`` finds a case's processes in /proc, ``checks.py`` holds the global checks, ``runner.py``
runs cases and judges them, ``table.py`` writes the results; the cases themselves are in ``cases/``, one
module per family.
"""
