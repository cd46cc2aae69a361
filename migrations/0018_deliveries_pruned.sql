-- Delivered deliveries are pruned after a week (Store.prune), their count kept per sink
-- here, so `sink list` and /metrics count every delivery while the table holds a week's.
ALTER TABLE sinks ADD COLUMN delivered_before INTEGER NOT NULL DEFAULT 0;
-- A sink's latest error is read newest first, among its own deliveries only.
CREATE INDEX deliveries_by_sink_time ON deliveries (sink, updated_at);
