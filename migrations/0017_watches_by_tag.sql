-- The dashboard's alerts of one tag, and its list of tags, are read through this index
-- (without it, every alert is scanned to find a rare tag's).
CREATE INDEX watches_by_tag ON watches (tag);
