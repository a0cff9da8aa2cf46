-- Worker liveness and the maintenance leader.

-- One row per live worker process. No index on last_seen_at: the table is small and
-- every heartbeat updates last_seen_at, which stays a cheap HOT update this way.
CREATE TABLE {schema}.workers (
    worker_id          text        PRIMARY KEY,
    hostname           text        NOT NULL,
    pid                integer     NOT NULL,
    queues             text[]      NOT NULL DEFAULT '{}',
    actors             text[]      NOT NULL DEFAULT '{}',
    worker_label       text,
    workgroup_instance text,
    started_at         timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

-- Who leads maintenance, for operators. The lock itself is a session advisory lock;
-- this row only records it. The boolean key allows at most one row.
CREATE TABLE {schema}.maintenance_leader (
    singleton    boolean     PRIMARY KEY DEFAULT true,
    worker_id    text        NOT NULL,
    elected_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT maintenance_leader_singleton_check CHECK (singleton)
);
