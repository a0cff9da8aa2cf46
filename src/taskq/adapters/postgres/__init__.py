"""What both Postgres drivers share: SQL text, migrations, schema naming.

- ``schema.Schema``: the validated, quoted schema name that fills ``{schema}``.
- ``sql_loader``: named queries from ``queries/*.sql``, rendered per driver.
- ``migrator``: which migrations (``migrations/*.sql``) to apply or revert.

Nothing here opens a connection; the ``asyncpg`` and ``psycopg`` packages do.
"""
