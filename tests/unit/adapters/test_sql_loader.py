"""The SQL loader: query files, named parameters, schema rendering, per-driver output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.adapters.postgres.schema import Schema, quote_identifier
from taskq.adapters.postgres.sql_loader import (
    Query,
    SqlFileError,
    load_queries,
    load_sql_file,
    numbered_queries,
    parse_sql,
    psycopg_queries,
    render_script,
)
from taskq.domain.errors import InvalidIdentifierError

S = Schema("tq")


def one(sql: str) -> Query:
    """Parse ``sql`` as the body of a single query named ``q``."""
    return parse_sql(f"-- name: q\n-- why\n{sql}\n")["q"]


def test_parses_name_why_and_body_in_file_order() -> None:
    """Each query keeps its name, its why line and its body; file order is kept."""
    text = (
        "-- File comment.\n\n"
        "-- name: first\n-- Because first.\nSELECT 1;\n\n"
        "-- name: second\n-- Because second.\n-- an inner comment\nSELECT 2\n"
    )
    queries = parse_sql(text, source="x.sql")
    assert list(queries) == ["first", "second"]
    assert queries["first"].why == "Because first."
    assert queries["first"].sql == "SELECT 1"
    assert queries["second"].sql == "-- an inner comment\nSELECT 2"
    assert queries["second"].source == "x.sql:7"


def test_numbered_numbers_params_in_order_and_reuses_repeated_names() -> None:
    """Parameters become $1, $2… by first appearance; a repeated name keeps its number."""
    q = one("SELECT * FROM t WHERE a = :a AND b = :b OR a > :a").numbered(S)
    assert q.sql == "SELECT * FROM t WHERE a = $1 AND b = $2 OR a > $1"
    assert q.params == ("a", "b")
    assert q.args(b=2, a=1) == (1, 2)


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT :a", "SELECT :a, :b, :a", "SELECT :b, :c, :a"])
def test_positional_is_bind_for_every_arity(sql: str) -> None:
    """The unchecked fast path returns what the checked bind does, in $n order."""
    q = one(sql).numbered(S)
    values = {name: f"v-{name}" for name in q.params}
    assert q.positional(values) == q.bind(values) == tuple(f"v-{n}" for n in q.params)


def test_positional_names_the_wrong_parameters_as_bind_does() -> None:
    """As many values as parameters but under other names, or too few or too many:
    the same TypeError naming them, never values bound to the wrong positions."""
    q = one("SELECT :a, :b").numbered(S)
    with pytest.raises(TypeError, match=r"missing parameter.*b.*unknown parameter.*c"):
        q.positional({"a": 1, "c": 2})
    with pytest.raises(TypeError, match=r"missing parameter.*b"):
        q.positional({"a": 1})
    with pytest.raises(TypeError, match=r"unknown parameter.*c"):
        q.positional({"a": 1, "b": 2, "c": 3})
    single = one("SELECT :a").numbered(S)
    with pytest.raises(TypeError, match=r"missing parameter.*a.*unknown parameter.*z"):
        single.positional({"z": 1})


def test_psycopg_uses_named_placeholders() -> None:
    """Parameters become %(name)s for psycopg, repeated names repeated."""
    q = one("SELECT :a, :b, :a").for_psycopg(S)
    assert q.sql == "SELECT %(a)s, %(b)s, %(a)s"
    assert q.bind({"a": 1, "b": 2}) == {"a": 1, "b": 2}


def test_casts_assignments_and_slices_are_not_parameters() -> None:
    """``::type`` casts, ``:=`` and numeric slices are left alone; ``:x::int`` is param + cast."""
    q = one("SELECT :x::int, '1'::text, arr[1:2], f(a := 1), y::jsonb").numbered(S)
    assert q.sql == "SELECT $1::int, '1'::text, arr[1:2], f(a := 1), y::jsonb"
    assert q.params == ("x",)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ':not_a_param'",
        "SELECT 'it''s :not'",
        "SELECT E'\\' :not'",
        'SELECT ":not" FROM t',
        "SELECT 1 -- :not\n",
        "SELECT /* :not /* nested :not */ still :not */ 1",
        "SELECT $$ :not $$",
        "SELECT $fn$ :not $x$ :not $fn$",
    ],
)
def test_text_in_literals_comments_and_dollar_quotes_has_no_parameters(sql: str) -> None:
    """Colons inside strings, quoted identifiers, comments or dollar quotes are not parameters."""
    q = one(sql)
    assert q.params == ()
    assert q.numbered(S).sql == sql.strip()


def test_schema_is_rendered_quoted_in_sql_and_dollar_bodies() -> None:
    """{schema} becomes the quoted identifier in SQL and inside dollar-quoted bodies."""
    q = one("SELECT {schema}.f($$ SELECT 1 FROM {schema}.t $$) FROM {schema}.jobs")
    expected = 'SELECT "tq".f($$ SELECT 1 FROM "tq".t $$) FROM "tq".jobs'
    assert q.numbered(S).sql == expected
    assert q.for_psycopg(S).sql == expected


def test_schema_inside_a_string_literal_is_refused() -> None:
    """{schema} inside a quoted literal would render wrongly, so the loader refuses it."""
    with pytest.raises(SqlFileError, match=r"<string>:3: \{schema\} inside a quoted literal"):
        one("SELECT 'taskq_wake_{schema}'")


def test_other_braces_are_plain_text() -> None:
    """Only the exact {schema} token is special; JSON and array literals pass through."""
    q = one("SELECT '{}'::jsonb, '{a,b}'::text[], '{\"k\": 1}'::jsonb")
    assert q.numbered(S).sql == "SELECT '{}'::jsonb, '{a,b}'::text[], '{\"k\": 1}'::jsonb"


def test_psycopg_doubles_every_literal_percent() -> None:
    """A literal % (operator, LIKE pattern, comment) is escaped as %% for psycopg only."""
    q = one("SELECT a % 2, 'x%' -- 5%\n, :p")
    assert q.for_psycopg(S).sql == "SELECT a %% 2, 'x%%' -- 5%%\n, %(p)s"
    assert q.numbered(S).sql == "SELECT a % 2, 'x%' -- 5%\n, $1"


def test_bind_names_missing_and_unknown_parameters() -> None:
    """Binding refuses missing or misspelled parameters, naming them."""
    q = one("SELECT :a, :b")
    with pytest.raises(TypeError, match=r"missing parameter\(s\) b; unknown parameter\(s\) c"):
        q.numbered(S).bind({"a": 1, "c": 3})
    with pytest.raises(TypeError, match=r"missing parameter\(s\) a"):
        q.for_psycopg(S).args(b=1)


def test_identifier_dollar_and_plain_dollar_are_text() -> None:
    """A $ inside an identifier or before a non-tag character is ordinary text."""
    q = one("SELECT a$b, '$' || 'x'")
    assert q.numbered(S).sql == "SELECT a$b, '$' || 'x'"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1\n-- name: q\n-- why\nSELECT 1\n", r"x.sql:1: SQL before the first"),
        ("-- name: q\nSELECT 1\n", r"x.sql:1: query 'q' needs a one-line '-- why' comment"),
        ("-- name: q\n--\nSELECT 1\n", r"needs a one-line '-- why'"),
        ("-- name: q\n-- why\n\n", r"x.sql:1: query 'q' has no SQL"),
        ("-- name: q\n-- why\n-- only a comment\n", r"query 'q' has no SQL"),
        ("-- name: q\n-- why\nSELECT 1\n-- name: q\n-- why\nSELECT 2\n", r"x.sql:4: duplicate"),
        ("-- name: Bad-Name\n-- why\nSELECT 1\n", r"x.sql:1: query name 'Bad-Name'"),
        ("-- name: q\n-- why\nSELECT 1; SELECT 2\n", r"more than one statement"),
        ("-- name: q\n-- why\nSELECT $1\n", r"x.sql:3: positional parameter"),
        ("-- name: q\n-- why\nSELECT 1,\n 'open\n", r"x.sql:4: unterminated string literal"),
        ('-- name: q\n-- why\nSELECT "open\n', r"unterminated quoted identifier"),
        ("-- name: q\n-- why\nSELECT /* open\n", r"unterminated block comment"),
        ("-- name: q\n-- why\nSELECT $a$ open\n", r"unterminated dollar-quoted text \$a\$"),
    ],
)
def test_malformed_files_are_refused_with_file_and_line(text: str, message: str) -> None:
    """Every format error names the file and the line it is on."""
    with pytest.raises(SqlFileError, match=message):
        parse_sql(text, source="x.sql")


def test_a_semicolon_inside_a_literal_is_not_a_second_statement() -> None:
    """Only a code-level ; counts as a statement separator."""
    assert one("SELECT ';', $$;$$ -- ;\n").params == ()


def test_render_script_fills_schema_and_keeps_plpgsql_assignments() -> None:
    """A migration script gets {schema} filled; := and casts inside it are fine."""
    script = (
        "CREATE TABLE {schema}.t (a int DEFAULT '1'::int);\n"
        "DO $$ DECLARE x int; BEGIN x := 1; PERFORM 1 FROM {schema}.t; END $$;\n"
    )
    out = render_script(script, S)
    assert out == script.replace("{schema}", '"tq"')


def test_render_script_refuses_parameters() -> None:
    """Scripts are run without bind values, so a :name in one is a mistake."""
    with pytest.raises(SqlFileError, match=r"m.sql:2: scripts take no parameters, found :oops"):
        render_script("SELECT 1;\nSELECT :oops;\n", S, source="m.sql")


def test_invalid_schema_names_cannot_be_rendered() -> None:
    """Only a validated Schema fills {schema}; a hostile name never gets that far."""
    with pytest.raises(InvalidIdentifierError, match="TASKQ_SCHEMA_NAME"):
        Schema('x"; DROP TABLE jobs; --')
    assert quote_identifier('a"b') == '"a""b"'


def test_load_sql_file_reads_from_disk(tmp_path: Path) -> None:
    """A query file on disk loads under its file name as source."""
    path = tmp_path / "extra.sql"
    path.write_text("-- name: q\n-- why\nSELECT :a\n", encoding="utf-8")
    queries = load_sql_file(path)
    assert queries["q"].source == "extra.sql:1"
    assert queries["q"].params == ("a",)


def test_packaged_migration_queries_load_and_render_for_both_drivers() -> None:
    """The shipped queries/migrations.sql parses and renders for asyncpg and psycopg."""
    queries = load_queries("migrations")
    assert {"lock_migrations", "applied_migrations", "record_migration"} <= set(queries)
    assert all(q.why for q in queries.values())
    record = numbered_queries("migrations", S)["record_migration"]
    assert record.params == ("version", "name", "checksum")
    assert '"tq".schema_migrations' in record.sql
    assert "$3" in record.sql
    assert "%(checksum)s" in psycopg_queries("migrations", S)["record_migration"].sql


def test_query_families_are_plain_names() -> None:
    """load_queries takes a family name, never a path."""
    with pytest.raises(ValueError, match="query family"):
        load_queries("../secrets")


_names = st.sampled_from(["a", "b", "job_id", "now", "x1"])
_fillers = st.sampled_from([" + ", ", ", " = ", "::int, ", " || ':s' || ", " -- c\n, "])


@given(st.lists(st.tuples(_names, _fillers), min_size=1, max_size=12))
def test_both_renderings_agree_on_which_value_goes_where(parts: list[tuple[str, str]]) -> None:
    """Substituting bound values back into either rendering yields the same SQL."""
    sql = "SELECT " + "".join(f":{name}{filler}" for name, filler in parts) + "1"
    query = one(sql)
    values = {name: f"<{name}>" for name in query.params}

    a = query.numbered(S)
    args = a.bind(values)
    from_asyncpg = re.sub(r"\$(\d+)", lambda m: str(args[int(m.group(1)) - 1]), a.sql)

    p = query.for_psycopg(S)
    kwargs = p.bind(values)
    from_psycopg = re.sub(r"%\((\w+)\)s", lambda m: str(kwargs[m.group(1)]), p.sql)

    expected = "SELECT " + "".join(f"<{name}>{filler}" for name, filler in parts) + "1"
    assert from_asyncpg == expected
    assert from_psycopg.replace("%%", "%") == expected
