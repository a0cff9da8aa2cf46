"""The traceback an attempt keeps: the usual text, size-bounded, without local variables.

A failed attempt's traceback is logged by the worker and stored with the
attempt (``job_attempts.traceback``), so it must stay small whatever the
error: a deep recursion, a long chain of causes, a message of megabytes. The
text is what :func:`traceback.format_exception` prints (causes and contexts
included, local variables never), at most :data:`MAX_TRACEBACK` characters.
When it is longer, the *outer* frames go first: the innermost frames (where
the error was raised) and the final exception line are what a reader needs,
so they are kept, and one line says how much was cut::

    Traceback (most recent call last):
      [... 41,213 characters of outer frames cut ...]
      File "app/actors.py", line 12, in resize
        data = fetch(payload.url)
      ...
    ConnectionError: connection refused

The final exception line is itself cut to half the bound (a huge message
stays readable, and leaves room for frames). Formatting never raises: a
failure to format is reported in the text instead.
"""

from __future__ import annotations

import traceback
from typing import Final

#: Longest traceback text an attempt keeps, in characters.
MAX_TRACEBACK: Final = 16_384
#: Frames formatted per exception of a chain, innermost first (Python's default
#: recursion limit): formatting a frame reads its source line, so a deeper stack
#: costs time for nothing; its outermost frames are not shown.
MAX_FRAMES: Final = 1_000
_HEADER: Final = "Traceback (most recent call last):\n"


def traceback_text(exc: BaseException, *, limit: int = MAX_TRACEBACK) -> str:
    """``exc``'s traceback as text (its chain included), at most ``limit`` characters."""
    try:
        formatted = traceback.TracebackException.from_exception(exc, limit=-MAX_FRAMES)
        parts = list(formatted.format())
        final = list(formatted.format_exception_only())
    except Exception as err:  # a broken __str__ is handled by traceback; anything else here
        return f"<the traceback of this {type(exc).__name__} could not be formatted: {err!r}>"[
            :limit
        ]
    text = "".join(parts)
    if len(text) <= limit:
        return text
    return _cut(parts, final, limit)


def _cut(parts: list[str], final: list[str], limit: int) -> str:
    """Keep the last exception line(s) and the innermost parts that fit in ``limit``."""
    tail = "".join(final)
    if final and parts[-len(final) :] == final:
        body = parts[: -len(final)]
    else:  # an exception group prints its members after its own line: keep the end
        body, tail = parts, ""
    tail = _shortened(tail, limit // 2)
    header = ""
    if body and body[0] == _HEADER:
        header, body = _HEADER, body[1:]
    total = sum(map(len, body))
    size = len(header) + len(_marker(total)) + len(tail)  # the longest marker it can need
    kept: list[str] = []
    dropped = total
    for part in reversed(body):
        # One huge part (a cause's message, a generated source line) must not hide the rest.
        short = _shortened(part, limit // 8)
        if size + len(short) > limit:
            break
        kept.append(short)
        size += len(short)
        dropped -= len(part)
    kept.reverse()
    marker = _marker(dropped) if dropped else ""
    return f"{header}{marker}{''.join(kept)}{tail}"[:limit]


def _shortened(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    return f"{text[:most]}… [{len(text) - most:,} more characters cut]\n"


def _marker(dropped: int) -> str:
    return f"  [... {dropped:,} characters of outer frames cut ...]\n"


__all__ = ["MAX_FRAMES", "MAX_TRACEBACK", "traceback_text"]
