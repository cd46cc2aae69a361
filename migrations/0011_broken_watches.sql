-- Broken-watch alerts: since when a watch's checks fail (or are skipped, its host being
-- disabled), and whether its "failing" alert went out, so its "recovered" alert follows once.

ALTER TABLE watches ADD COLUMN failing_since REAL;
ALTER TABLE watches ADD COLUMN broken_alerted INTEGER NOT NULL DEFAULT 0;
UPDATE watches SET failing_since = last_check
 WHERE consecutive_failures > 0 OR last_status LIKE 'skipped%';
