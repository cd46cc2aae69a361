-- Host cooldowns escalate: the first lasts host_cooldown_first seconds, and each one that
-- follows a cooldown ended less than a day ago (a strike) lasts twice as long, up to
-- host_cooldown. `monitor hosts` shows which exits were refused and who reported it.

ALTER TABLE host_cooldowns ADD COLUMN strikes INTEGER NOT NULL DEFAULT 1;
ALTER TABLE host_cooldowns ADD COLUMN exits   TEXT    NOT NULL DEFAULT '';
ALTER TABLE host_cooldowns ADD COLUMN worker  TEXT    NOT NULL DEFAULT '';
