-- Proxy leases become rows of their own: a proxy may serve several workers (an HTTP proxy
-- serves many connections, and a fleet larger than its pool must not sit idle), and each
-- lease names the worker run (pid and start time) that holds it, so a restarted worker's
-- old leases can be told from its new ones. Refusals by host and exit let the controller
-- disable a host only when every exit of the pool was refused by it.

CREATE TABLE leases (
    proxy_id    INTEGER NOT NULL REFERENCES proxies(id) ON DELETE CASCADE,
    worker      TEXT    NOT NULL,
    run         TEXT    NOT NULL,   -- '<pid>:<start time>' of the worker process
    leased_at   REAL    NOT NULL,
    PRIMARY KEY (proxy_id, worker)
);
INSERT INTO leases (proxy_id, worker, run, leased_at)
    SELECT id, leased_to, '', COALESCE(leased_at, 0) FROM proxies WHERE leased_to IS NOT NULL;
ALTER TABLE proxies DROP COLUMN leased_to;
ALTER TABLE proxies DROP COLUMN leased_at;
ALTER TABLE proxies ADD COLUMN failed_at REAL;  -- the proxy itself failed (unreachable, 407)

CREATE TABLE refusals (
    host        TEXT    NOT NULL,
    exit_id     INTEGER NOT NULL,   -- a proxy id, or 0 for the direct connection
    at          REAL    NOT NULL,
    PRIMARY KEY (host, exit_id)
);
