-- Rules that hold back alerts (never links): global (watch_id and tag NULL), per tag or per
-- watch. See monitor/filters.py.

CREATE TABLE filters (
    id          INTEGER PRIMARY KEY,
    rule        TEXT    NOT NULL,    -- include, exclude, url-allow, url-deny, same-site
    pattern     TEXT    NOT NULL DEFAULT '',
    watch_id    INTEGER REFERENCES watches (id) ON DELETE CASCADE,
    tag         TEXT,
    created_at  REAL    NOT NULL
);
