-- A watch may keep only the links inside the regions a CSS selector matches (`watch add
-- --selector`, `watch set --selector`). '' means the whole page.
--
-- links_selector is the selector the watch's known links were found under. After the
-- selector changes the two differ, and the first check under the new one is adopted like a
-- baseline (its links recorded, not alerted): widening a region must not alert every link
-- that was merely outside the old one. See controller/processor.py.

ALTER TABLE watches ADD COLUMN selector TEXT NOT NULL DEFAULT '';
ALTER TABLE watches ADD COLUMN links_selector TEXT NOT NULL DEFAULT '';
