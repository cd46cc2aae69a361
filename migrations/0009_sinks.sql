-- Alert sinks (webhook, e-mail, Apprise) and the delivery of each alert to each of them.
-- A sink takes every alert (watch_id and tag NULL), one watch's, or one tag's.

CREATE TABLE sinks (
    name        TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL,
    target      TEXT    NOT NULL,                  -- may hold secrets: never printed unmasked
    options     TEXT    NOT NULL DEFAULT '{}',     -- JSON: secret, headers, ...
    watch_id    INTEGER REFERENCES watches (id) ON DELETE CASCADE,
    tag         TEXT,
    created_at  REAL    NOT NULL
);

-- One row per (sink, alert): pending (due at next_try), delivered, or failed (gave up
-- after sink_max_attempts; `monitor alerts retry` makes it pending again).
CREATE TABLE deliveries (
    sink        TEXT    NOT NULL REFERENCES sinks (name) ON DELETE CASCADE,
    alert_id    TEXT    NOT NULL REFERENCES alerts (alert_id) ON DELETE CASCADE,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_try    REAL    NOT NULL,
    last_error  TEXT,
    updated_at  REAL    NOT NULL,
    PRIMARY KEY (sink, alert_id)
);
CREATE INDEX deliveries_due ON deliveries (state, sink, next_try);

-- An alert is queued for its sinks in the transaction that records it, so an alert made
-- durable is a delivery made durable; INSERT OR IGNORE of a known alert queues nothing.
CREATE TRIGGER alerts_to_sinks AFTER INSERT ON alerts
BEGIN
    INSERT INTO deliveries (sink, alert_id, state, next_try, updated_at)
    SELECT name, NEW.alert_id, 'pending', NEW.first_seen, NEW.first_seen FROM sinks
    WHERE (watch_id IS NULL AND tag IS NULL) OR watch_id = NEW.watch_id
       OR tag = (SELECT tag FROM watches WHERE id = NEW.watch_id);
END;
