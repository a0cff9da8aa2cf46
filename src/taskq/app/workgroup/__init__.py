"""The workgroup supervisor: ``taskq workgroup start FILE.toml`` (docs/workgroup.md).

It runs each ``[[workers]]`` entry of the file as a ``taskq worker`` child process,
restarts crashed children within a burst limit, SIGKILLs children whose heartbeat went
stale, and passes SIGTERM/SIGINT on to every child. Children are processes, never
imported: this package does not import the worker runtime.
"""
