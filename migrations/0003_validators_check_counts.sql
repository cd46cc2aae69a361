-- Fetch validators kept per watch (sent with each job: conditional GET and body hash), and
-- per-minute counts of check outcomes (checks per second, how often 304 and the hash fire).

ALTER TABLE watches ADD COLUMN etag TEXT;
ALTER TABLE watches ADD COLUMN last_modified TEXT;
ALTER TABLE watches ADD COLUMN content_hash TEXT;

CREATE TABLE check_counts (
    minute      INTEGER NOT NULL,   -- unix time // 60 of the check
    outcome     TEXT    NOT NULL,   -- 'ok', 'not_modified_http', 'not_modified_hash', 'error', 'skipped'
    count       INTEGER NOT NULL,
    PRIMARY KEY (minute, outcome)
);
