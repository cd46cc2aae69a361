-- How long checks take, as Prometheus histograms that survive every restart: per kind
-- ('fetch': the page's download, 'parse': extracting its links) and bucket (its upper
-- bound in seconds, a bound of store.TIMING_BUCKETS_S or +Inf), the number of checks and
-- the seconds they took. Never pruned: a few dozen rows in all.
CREATE TABLE timings (
    kind     TEXT    NOT NULL,
    le       REAL    NOT NULL,
    count    INTEGER NOT NULL,
    seconds  REAL    NOT NULL,
    PRIMARY KEY (kind, le)
);
-- Each recent check's parse time, beside its fetch time.
ALTER TABLE checks ADD COLUMN parse_ms REAL;
