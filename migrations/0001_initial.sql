-- The watch list, the links found on each watched page and the alerts they produced.

CREATE TABLE watches (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    url                 TEXT    NOT NULL UNIQUE,
    name                TEXT,
    tag                 TEXT,
    interval_s          INTEGER NOT NULL CHECK (interval_s > 0),
    enabled             INTEGER NOT NULL DEFAULT 1,
    created_at          REAL    NOT NULL,
    next_due            REAL    NOT NULL,
    in_flight_since     REAL,            -- set when a job is published, cleared by its result
    last_check          REAL,
    last_status         TEXT,            -- 'ok', or 'error: <reason>'
    last_http_status    INTEGER,
    last_elapsed_ms     INTEGER,
    consecutive_failures INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX watches_due ON watches (enabled, next_due);

CREATE TABLE links (
    watch_id    INTEGER NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    url         TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    first_seen  REAL    NOT NULL,
    PRIMARY KEY (watch_id, url)
);
CREATE INDEX links_newest ON links (watch_id, first_seen);

CREATE TABLE alerts (
    alert_id    TEXT    PRIMARY KEY,     -- '<watch id>-<code>' (+ '-<n>' for a code collision)
    watch_id    INTEGER NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    url         TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    first_seen  REAL    NOT NULL
);
CREATE INDEX alerts_by_time ON alerts (first_seen);
CREATE INDEX alerts_by_watch ON alerts (watch_id, first_seen);
