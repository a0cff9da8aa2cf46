"""The traceback an attempt keeps: the usual text, bounded, innermost frames and final line kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from taskq.domain.outcomes import Fail, Raised, Retry
from taskq.domain.retry import RetryPolicy, decide
from taskq.domain.tracebacks import MAX_TRACEBACK, traceback_text

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _raised(fn: object, *args: object) -> BaseException:
    try:
        fn(*args)  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _deep(n: int, message: str) -> None:
    if n == 0:
        secret = "hunter2"  # a local variable: never in the text
        raise ValueError(message + secret[:0])
    _deep_again(n - 1, message)


def _deep_again(n: int, message: str) -> None:  # two functions: no "repeated" folding
    _deep(n, message)


def test_a_short_traceback_is_the_usual_text() -> None:
    """Under the bound the text is what traceback.format_exception prints, locals never."""
    exc = _raised(_deep, 2, "boom")
    text = traceback_text(exc)
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith("ValueError: boom\n")
    assert "raise ValueError(message + secret[:0])" in text
    assert "hunter2" not in text


def test_a_long_traceback_keeps_the_innermost_frames_and_the_exception_line() -> None:
    """A deep stack is cut to MAX_TRACEBACK characters from the outside: the raising frame
    and the exception line stay, and one line says how much was cut."""
    exc = _raised(_deep, 400, "deep")
    text = traceback_text(exc)
    assert len(text) <= MAX_TRACEBACK
    assert text.startswith("Traceback (most recent call last):\n  [... ")
    assert "characters of outer frames cut ...]\n" in text
    assert text.endswith("ValueError: deep\n")
    assert "raise ValueError(message + secret[:0])" in text
    assert " in _raised\n" not in text  # the outermost frame went first


def test_a_huge_message_is_cut_and_frames_still_fit() -> None:
    """A megabyte message takes at most half the bound; the raising frame is still shown."""
    exc = _raised(_deep, 3, "x" * 1_000_000)
    text = traceback_text(exc)
    assert len(text) <= MAX_TRACEBACK
    assert "more characters cut]" in text
    assert "in _deep" in text
    assert "ValueError: xxx" in text


def test_a_chain_keeps_its_final_exception_and_the_causes_innermost_frames() -> None:
    """With a long cause, the final exception is whole and the cause's raising frame kept."""

    def wrap() -> None:
        try:
            _deep(300, "y" * 50_000)
        except ValueError as exc:
            raise RuntimeError("wrapped") from exc

    text = traceback_text(_raised(wrap))
    assert len(text) <= MAX_TRACEBACK
    assert text.endswith("RuntimeError: wrapped\n")
    assert "The above exception was the direct cause" in text
    assert 'raise RuntimeError("wrapped") from exc' in text
    assert "raise ValueError(message + secret[:0])" in text


@pytest.mark.parametrize("limit", [200, 1_000, 5_000])
def test_every_limit_is_kept(limit: int) -> None:
    """The bound holds for any limit, whatever the exception."""
    for exc in (
        _raised(_deep, 200, "z" * 10_000),
        _raised(lambda: (_ for _ in ()).throw(ExceptionGroup("g", [ValueError("v" * 9_000)]))),
    ):
        assert len(traceback_text(exc, limit=limit)) <= limit


def test_an_exception_whose_str_raises_is_formatted() -> None:
    """A broken __str__ does not break the traceback (the traceback module says so)."""

    class Odd(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert "Odd: <exception str() failed>" in traceback_text(_raised(_raise, Odd()))


def _raise(exc: BaseException) -> None:
    raise exc


def test_raised_carries_the_traceback_of_a_raised_exception_only() -> None:
    """Raised.from_exception keeps a raised exception's traceback; one never raised has none."""
    raised = Raised.from_exception(_raised(_deep, 1, "boom"))
    assert raised.traceback is not None
    assert raised.traceback.endswith("ValueError: boom\n")
    assert Raised.from_exception(ValueError("never raised")).traceback is None


@pytest.mark.parametrize(
    ("policy", "attempt", "decision_type"),
    [
        (RetryPolicy(max_attempts=3), 1, Retry),
        (RetryPolicy(max_attempts=3), 3, Fail),
        (RetryPolicy(kind="non_retryable"), 1, Fail),
    ],
)
def test_a_decision_on_an_error_carries_its_traceback(
    policy: RetryPolicy, attempt: int, decision_type: type
) -> None:
    """A retry or a failure after an error carries the error's traceback to the write."""
    outcome = Raised("OSError", "no", traceback="the traceback\n")
    decision = decide(
        policy,
        attempt=attempt,
        outcome=outcome,
        now=NOW,
        schedule_to_close=None,
        max_retry_backoff=timedelta(hours=1),
        rng=lambda a, b: 1.0,
    )
    assert isinstance(decision, decision_type)
    assert isinstance(decision, Retry | Fail)
    assert decision.traceback == "the traceback\n"


def test_a_deadline_failure_after_an_error_carries_its_traceback() -> None:
    """DeadlineExceeded decided on an error keeps that error's traceback."""
    decision = decide(
        RetryPolicy(kind="indefinite"),
        attempt=1,
        outcome=Raised("OSError", "no", traceback="tb\n"),
        now=NOW,
        schedule_to_close=NOW,
        max_retry_backoff=timedelta(hours=1),
        rng=lambda a, b: 1.0,
    )
    assert isinstance(decision, Fail)
    assert (decision.error_class, decision.traceback) == ("DeadlineExceeded", "tb\n")
