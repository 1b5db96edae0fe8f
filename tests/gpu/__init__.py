"""The checks that need a GPU: ``check.py`` is one script for a machine that has one
(``python -m tests.gpu.check --out DIR``), ``test_gpu.py`` runs the same checks under pytest (skipped without CUDA)."""
