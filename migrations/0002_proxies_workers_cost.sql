-- The proxy pool (VPN exits) and its leases, the worker fleet's heartbeats, the shared
-- host disable list, and the per-site cost (the VPN patent's site weights).

CREATE TABLE proxies (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    url         TEXT    NOT NULL UNIQUE,  -- may hold credentials: never printed unmasked
    leased_to   TEXT,                     -- worker id, NULL when free
    leased_at   REAL,
    last_error  TEXT,
    requests    INTEGER NOT NULL DEFAULT 0,
    refusals    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL    NOT NULL
);

CREATE TABLE workers (
    id              TEXT    PRIMARY KEY,  -- '<host>/<process name>'
    host            TEXT    NOT NULL,
    pid             INTEGER NOT NULL,
    state           TEXT    NOT NULL,     -- 'alive', 'lost', 'stopped'
    started_at      REAL    NOT NULL,
    last_heartbeat  REAL    NOT NULL,
    jobs_done       INTEGER NOT NULL DEFAULT 0,
    errors          INTEGER NOT NULL DEFAULT 0,
    current_job     TEXT
);

CREATE TABLE host_cooldowns (
    host        TEXT    PRIMARY KEY,
    until       REAL    NOT NULL,
    reason      TEXT    NOT NULL,
    since       REAL    NOT NULL
);

ALTER TABLE watches ADD COLUMN cost_ms REAL;  -- moving average of fetch time
