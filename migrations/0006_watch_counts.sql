-- Counts of a watch's known links and alerts, kept as results are recorded: `watch list`
-- counted every link row of every watch on each call, which grows with the years.

ALTER TABLE watches ADD COLUMN links_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE watches ADD COLUMN alerts_count INTEGER NOT NULL DEFAULT 0;
UPDATE watches SET links_count = (SELECT COUNT(*) FROM links l WHERE l.watch_id = watches.id),
                   alerts_count = (SELECT COUNT(*) FROM alerts a WHERE a.watch_id = watches.id);
