"""Named SQL queries, written once, rendered for asyncpg and for psycopg.

A query file (``queries/<family>.sql``) holds queries like this::

    -- Optional comment lines about the whole file.

    -- name: get_job
    -- Why it is written this way: one line, required.
    SELECT * FROM {schema}.jobs WHERE id = :job_id AND payload ? 'x'

- ``:job_id`` is a named parameter. ``::type`` casts, ``:=``, and anything in
  string literals, quoted identifiers, comments or dollar-quoted bodies are
  not parameters. Write array slices with numbers or spaces (``a[1:2]``,
  ``a[lo : hi]``): ``a[lo:hi]`` would read ``:hi`` as a parameter.
- ``{schema}`` becomes the quoted, validated schema name. It may appear in
  SQL and in dollar-quoted bodies, but not inside a string literal or quoted
  identifier (pass such text as a parameter instead).
- One statement per query; a trailing ``;`` is dropped. ``$1``-style
  positional parameters are refused: names only.

Rendering: :meth:`Query.numbered` gives ``$1, $2 …`` and the parameter
name bound to each position (a repeated name reuses its number), which
asyncpg runs and so do psycopg's raw cursors;
:meth:`Query.for_psycopg` gives ``%(name)s`` with every literal ``%``
doubled. :func:`render_script` renders a whole multi-statement script (a
migration) that takes no parameters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from taskq.adapters.postgres.schema import Schema

#: The package whose ``queries/`` directory :func:`load_queries` reads.
QUERIES_PACKAGE: Final = "taskq.adapters.postgres"
SCHEMA_TOKEN: Final = "{schema}"

_Kind = Literal["code", "other", "param", "schema"]
# code: SQL text; other: strings, identifiers, comments, dollar bodies (kept verbatim);
# param: a parameter name; schema: the {schema} placeholder.
_Segment = tuple[_Kind, str]

_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_HEADER = re.compile(r"--\s*name:(.*)")
_SPECIAL = re.compile(r"--|/\*|['\"$:{]")
_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")
_COMMENT_MARK = re.compile(r"/\*|\*/")


class SqlFileError(ValueError):
    """A query file or SQL text breaks the format; the message names file and line."""


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


class _Scanner:
    """Splits SQL text into segments, tracking where we are for error messages."""

    def __init__(self, text: str, source: str, first_line: int, *, params: bool = True) -> None:
        self.text = text
        self.source = source
        self.first_line = first_line
        self.params = params
        self.segments: list[_Segment] = []
        self._code: list[str] = []

    def fail(self, pos: int, message: str) -> SqlFileError:
        line = self.first_line + self.text.count("\n", 0, pos)
        return SqlFileError(f"{self.source}:{line}: {message}")

    def _flush(self) -> None:
        if self._code:
            self.segments.append(("code", "".join(self._code)))
            self._code.clear()

    def _emit(self, kind: _Kind, value: str) -> None:
        self._flush()
        self.segments.append((kind, value))

    def _quoted_end(self, start: int, quote: str, *, backslash: bool) -> int:
        """Index just past the literal opening at ``start`` (doubled quotes escape)."""
        text, i = self.text, start + 1
        while True:
            j = text.find(quote, i)
            if backslash:
                k = text.find("\\", i)
                if k != -1 and (j == -1 or k < j):
                    i = k + 2
                    continue
            if j == -1:
                what = "string literal" if quote == "'" else "quoted identifier"
                raise self.fail(start, f"unterminated {what}")
            if text.startswith(quote * 2, j):
                i = j + 2
                continue
            return j + 1

    def _comment_end(self, start: int) -> int:
        """Index just past the (possibly nested) block comment opening at ``start``."""
        depth, i = 0, start
        while True:
            m = _COMMENT_MARK.search(self.text, i)
            if m is None:
                raise self.fail(start, "unterminated block comment")
            depth += 1 if m.group() == "/*" else -1
            i = m.end()
            if depth == 0:
                return i

    def _literal(self, start: int, end: int) -> None:
        literal = self.text[start:end]
        if SCHEMA_TOKEN in literal:
            raise self.fail(
                start, f"{SCHEMA_TOKEN} inside a quoted literal; pass the text as a parameter"
            )
        self._emit("other", literal)

    def _dollar_body(self, tag: str, start: int) -> int:
        """Emit a dollar-quoted body (with ``{schema}`` filled in); return the index past it."""
        body_start = start + len(tag)
        close = self.text.find(tag, body_start)
        if close == -1:
            raise self.fail(start, f"unterminated dollar-quoted text {tag}")
        self._emit("other", tag)
        for k, piece in enumerate(self.text[body_start:close].split(SCHEMA_TOKEN)):
            if k:
                self._emit("schema", SCHEMA_TOKEN)
            if piece:
                self._emit("other", piece)
        self._emit("other", tag)
        return close + len(tag)

    def scan(self) -> tuple[_Segment, ...]:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            m = _SPECIAL.search(text, i)
            if m is None:
                self._code.append(text[i:])
                break
            j, tok = m.start(), m.group()
            self._code.append(text[i:j])
            if tok == "--":
                end = text.find("\n", j)
                i = n if end == -1 else end
                self._emit("other", text[j:i])
            elif tok == "/*":
                i = self._comment_end(j)
                self._emit("other", text[j:i])
            elif tok == "'":
                escapes = (
                    j > 0 and text[j - 1] in "Ee" and (j < 2 or not _is_ident_char(text[j - 2]))
                )
                i = self._quoted_end(j, "'", backslash=escapes)
                self._literal(j, i)
            elif tok == '"':
                i = self._quoted_end(j, '"', backslash=False)
                self._literal(j, i)
            elif tok == "$":
                i = self._dollar(j)
            elif tok == ":":
                i = self._colon(j)
            elif text.startswith(SCHEMA_TOKEN, j):
                self._emit("schema", SCHEMA_TOKEN)
                i = j + len(SCHEMA_TOKEN)
            else:  # a "{" that is not {schema}
                self._code.append(tok)
                i = j + 1
        self._flush()
        return tuple(self.segments)

    def _dollar(self, j: int) -> int:
        text = self.text
        if j > 0 and _is_ident_char(text[j - 1]):  # part of an identifier such as a$b
            self._code.append("$")
            return j + 1
        tag = _DOLLAR_TAG.match(text, j)
        if tag is not None:
            return self._dollar_body(tag.group(), j)
        if text[j + 1 : j + 2].isdigit():
            raise self.fail(j, "positional parameter: write a named parameter (:name) instead")
        self._code.append("$")
        return j + 1

    def _colon(self, j: int) -> int:
        nxt = self.text[j + 1 : j + 2]
        if nxt in (":", "="):  # a ::cast or a := assignment
            self._code.append(":" + nxt)
            return j + 2
        param = _PARAM.match(self.text, j)
        if param is None:
            self._code.append(":")
            return j + 1
        if not self.params:
            raise self.fail(j, f"scripts take no parameters, found :{param.group(1)}")
        self._emit("param", param.group(1))
        return param.end()


def _scan(text: str, *, source: str, first_line: int = 1) -> tuple[_Segment, ...]:
    return _Scanner(text, source, first_line).scan()


def _distinct_params(segments: tuple[_Segment, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for kind, value in segments if kind == "param"))


def _check_values(query: str, params: tuple[str, ...], values: Mapping[str, object]) -> None:
    missing = [p for p in params if p not in values]
    unknown = sorted(set(values) - set(params))
    problems = []
    if missing:
        problems.append("missing parameter(s) " + ", ".join(missing))
    if unknown:
        problems.append("unknown parameter(s) " + ", ".join(unknown))
    if problems:
        raise TypeError(f"query {query!r}: " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class NumberedQuery:
    """A query with ``$n`` placeholders (asyncpg's, and psycopg's raw cursors'):
    ``params[i]`` binds ``$<i+1>``."""

    name: str
    sql: str
    params: tuple[str, ...]
    #: ``params``' values out of a mapping in one C call (the hot path's bind).
    _pick: Callable[[Mapping[str, object]], tuple[object, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        params = self.params
        if len(params) >= 2:
            pick: Callable[[Mapping[str, object]], Any] = itemgetter(*params)
        elif params:
            (only,) = params
            pick = lambda values: (values[only],)  # noqa: E731
        else:
            pick = lambda values: ()  # noqa: E731
        object.__setattr__(self, "_pick", pick)

    def bind(self, values: Mapping[str, object]) -> tuple[object, ...]:
        """Positional arguments for ``conn.fetch(q.sql, *q.bind(values))``.

        Raises ``TypeError`` naming missing or unknown parameters.
        """
        _check_values(self.name, self.params, values)
        return tuple(values[p] for p in self.params)

    def positional(self, values: Mapping[str, object]) -> tuple[object, ...]:
        """:meth:`bind`, checked only when ``values`` is not exactly the parameters.

        As many values as parameters and none missing means the same names,
        so the usual call costs one lookup per parameter and nothing else.
        """
        if len(values) == len(self.params):
            try:
                return self._pick(values)
            except KeyError:
                pass
        return self.bind(values)

    def args(self, **values: object) -> tuple[object, ...]:
        """Keyword form of :meth:`bind`."""
        return self.bind(values)


@dataclass(frozen=True, slots=True)
class PsycopgQuery:
    """A query rendered for psycopg (``%(name)s`` placeholders, ``%`` doubled)."""

    name: str
    sql: str
    params: tuple[str, ...]

    def bind(self, values: Mapping[str, object]) -> dict[str, object]:
        """The parameter mapping for ``cur.execute(q.sql, q.bind(values))``.

        Raises ``TypeError`` naming missing or unknown parameters.
        """
        _check_values(self.name, self.params, values)
        return {p: values[p] for p in self.params}

    def args(self, **values: object) -> dict[str, object]:
        """Keyword form of :meth:`bind`."""
        return self.bind(values)


@dataclass(frozen=True, slots=True)
class Query:
    """One named query as written: ``sql`` holds ``:params`` and ``{schema}``.

    ``source`` is ``file:line`` of its header; ``params`` lists the distinct
    parameter names in order of first appearance.
    """

    name: str
    why: str
    sql: str
    source: str
    segments: tuple[_Segment, ...] = field(repr=False)

    @property
    def params(self) -> tuple[str, ...]:
        return _distinct_params(self.segments)

    def numbered(self, schema: Schema) -> NumberedQuery:
        """``$n`` placeholders numbered by first appearance; ``{schema}`` filled in."""
        numbers: dict[str, int] = {}
        out: list[str] = []
        for kind, value in self.segments:
            if kind == "param":
                number = numbers.setdefault(value, len(numbers) + 1)
                out.append(f"${number}")
            elif kind == "schema":
                out.append(schema.quoted)
            else:
                out.append(value)
        return NumberedQuery(self.name, "".join(out), tuple(numbers))

    def for_psycopg(self, schema: Schema) -> PsycopgQuery:
        """``%(name)s`` placeholders, literal ``%`` doubled; ``{schema}`` filled in."""
        out: list[str] = []
        for kind, value in self.segments:
            if kind == "param":
                out.append(f"%({value})s")
            elif kind == "schema":
                out.append(schema.quoted.replace("%", "%%"))
            else:
                out.append(value.replace("%", "%%"))
        return PsycopgQuery(self.name, "".join(out), self.params)


def render_script(sql: str, schema: Schema, *, source: str = "<script>") -> str:
    """A multi-statement script (e.g. a migration) with ``{schema}`` filled in.

    Scripts take no parameters; a ``:name`` in SQL raises :class:`SqlFileError`.
    """
    segments = _Scanner(sql, source, 1, params=False).scan()
    return "".join(schema.quoted if kind == "schema" else value for kind, value in segments)


def _strip_statement(body: str) -> str:
    body = body.strip()
    if body.endswith(";"):
        body = body[:-1].rstrip()
    return body


def parse_sql(text: str, *, source: str = "<string>") -> dict[str, Query]:
    """Parse the queries of one file, in file order. Raises :class:`SqlFileError`."""
    queries: dict[str, Query] = {}
    lines = text.splitlines()
    headers: list[tuple[int, str]] = []  # (0-based line index, name)
    for index, line in enumerate(lines):
        header = _HEADER.fullmatch(line.strip())
        if header is None:
            continue
        name = header.group(1).strip()
        if _NAME.fullmatch(name) is None:
            raise SqlFileError(
                f"{source}:{index + 1}: query name {name!r} must be lowercase letters, "
                "digits and '_'"
            )
        headers.append((index, name))
    first = headers[0][0] if headers else len(lines)
    for index in range(first):
        stripped = lines[index].strip()
        if stripped and not stripped.startswith("--"):
            raise SqlFileError(f"{source}:{index + 1}: SQL before the first '-- name:' header")
    for k, (index, name) in enumerate(headers):
        where = f"{source}:{index + 1}"
        end = headers[k + 1][0] if k + 1 < len(headers) else len(lines)
        if name in queries:
            raise SqlFileError(f"{where}: duplicate query name {name!r}")
        why_line = lines[index + 1].strip() if index + 1 < end else ""
        why = why_line[2:].strip() if why_line.startswith("--") else ""
        if not why:
            raise SqlFileError(f"{where}: query {name!r} needs a one-line '-- why' comment")
        body = _strip_statement("\n".join(lines[index + 2 : end]))
        body_line = (
            index + 3 + next((n for n, ln in enumerate(lines[index + 2 : end]) if ln.strip()), 0)
        )
        segments = _scan(body, source=source, first_line=body_line)
        code = "".join(value for kind, value in segments if kind == "code")
        if not any(
            kind in ("code", "param", "schema") and value.strip() for kind, value in segments
        ):
            raise SqlFileError(f"{where}: query {name!r} has no SQL")
        if ";" in code:
            raise SqlFileError(f"{where}: query {name!r} holds more than one statement")
        queries[name] = Query(name, why, body, where, segments)
    return queries


def load_sql_file(path: Path | Traversable) -> Mapping[str, Query]:
    """Parse one query file from disk or from package resources."""
    return MappingProxyType(parse_sql(path.read_text(encoding="utf-8"), source=path.name))


def _family_file(family: str) -> Traversable:
    if _NAME.fullmatch(family) is None:
        raise ValueError(f"query family {family!r} must be lowercase letters, digits and '_'")
    return resources.files(QUERIES_PACKAGE).joinpath("queries", f"{family}.sql")


@functools.cache
def load_queries(family: str) -> Mapping[str, Query]:
    """The queries of ``queries/<family>.sql`` in this package (parsed once)."""
    return load_sql_file(_family_file(family))


@functools.cache
def numbered_queries(family: str, schema: Schema) -> Mapping[str, NumberedQuery]:
    """Every query of ``family`` rendered for asyncpg in ``schema`` (rendered once)."""
    return MappingProxyType({n: q.numbered(schema) for n, q in load_queries(family).items()})


@functools.cache
def psycopg_queries(family: str, schema: Schema) -> Mapping[str, PsycopgQuery]:
    """Every query of ``family`` rendered for psycopg in ``schema`` (rendered once)."""
    return MappingProxyType({n: q.for_psycopg(schema) for n, q in load_queries(family).items()})


__all__ = [
    "QUERIES_PACKAGE",
    "SCHEMA_TOKEN",
    "NumberedQuery",
    "PsycopgQuery",
    "Query",
    "SqlFileError",
    "load_queries",
    "load_sql_file",
    "numbered_queries",
    "parse_sql",
    "psycopg_queries",
    "render_script",
]
