"""TaskQ on psycopg 3: the same SQL and behaviour as the asyncpg adapter, bound the psycopg way."""
