-- The recent checks of each watch, for its page on the dashboard: the last HISTORY (50) of
-- them, in a ring of slots (checks_done % 50), so keeping them costs one row write a check.

CREATE TABLE checks (
    watch_id    INTEGER NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    slot        INTEGER NOT NULL,
    checked_at  REAL    NOT NULL,
    outcome     TEXT    NOT NULL,    -- ok, not_modified_http, not_modified_hash, error, skipped
    status      TEXT    NOT NULL,    -- the line `watch list` shows
    elapsed_ms  INTEGER,             -- the fetch's
    found       INTEGER,             -- links on the page (NULL: not parsed)
    new         INTEGER NOT NULL DEFAULT 0,  -- links never seen before
    alerted     INTEGER NOT NULL DEFAULT 0,  -- of those, alerted
    PRIMARY KEY (watch_id, slot)
);
ALTER TABLE watches ADD COLUMN checks_done INTEGER NOT NULL DEFAULT 0;
