-- Query parameters a watch's links are compared without: those its user named (session ids,
-- cache-busters) and those the processor found to change on every check. Space-separated,
-- lower case. See monitor/urls.py (comparable) and controller/processor.py (volatile).

ALTER TABLE watches ADD COLUMN ignore_params TEXT NOT NULL DEFAULT '';
ALTER TABLE watches ADD COLUMN volatile_params TEXT NOT NULL DEFAULT '';
