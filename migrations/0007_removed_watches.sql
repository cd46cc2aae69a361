-- Watches removed from the list whose seen-link index entries (in LevelDB, which only the
-- processor may open) are still to be deleted; the processor deletes them and the row.

CREATE TABLE removed_watches (
    id          INTEGER PRIMARY KEY,
    removed_at  REAL    NOT NULL
);
