"""The worker at the import paths the worker guide uses (``taskq.worker.run``).

Thin public names only: the runtime lives in :mod:`taskq.app.worker`.
"""
