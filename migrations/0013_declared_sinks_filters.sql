-- Sinks and filters declared in the TOML file ([sinks.NAME], [[filters]]) live in the same
-- tables, marked declared: the file is their source (monitor/sinks/declared.py keeps them
-- in step with it), so the CLI does not remove them and the file's edits reach them.
ALTER TABLE sinks ADD COLUMN declared INTEGER NOT NULL DEFAULT 0;
ALTER TABLE filters ADD COLUMN declared INTEGER NOT NULL DEFAULT 0;

-- When a pending delivery first failed (updated_at moves with every attempt): what
-- `monitor sink list` shows as FAILING SINCE.
ALTER TABLE deliveries ADD COLUMN failing_since REAL;
