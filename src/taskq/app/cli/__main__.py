"""``python -m taskq.app.cli``: the same entry point as the ``taskq`` script."""

from taskq.app.cli import main

main()
