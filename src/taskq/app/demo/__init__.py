"""``taskq demo``: a real worker processing sample jobs, for a first look at TaskQ.

:func:`run_demo` does the work (see :mod:`taskq.app.demo.run`); the sample
actors are in :mod:`taskq.app.demo.actors`, the job mix in
:mod:`taskq.app.demo.plan`.
"""

from __future__ import annotations

from taskq.app.demo.run import DemoOptions, DemoOutcome, run_demo

__all__ = ["DemoOptions", "DemoOutcome", "run_demo"]
