-- When the page behind a watch's last applied result was fetched: a result fetched earlier
-- (a timed-out job's late task, a replayed dead letter) is stale and must not overwrite it.

ALTER TABLE watches ADD COLUMN last_fetched_at REAL;
