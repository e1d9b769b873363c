-- no-transaction
-- Instances and process metrics.
--
-- 1. A route's identity on a target includes its instance: the `instance` (or `pod`) label
--    of its series when the exposition names one ('' = the target's own instance), so a
--    restarted service that comes back under new instance labels gets new route rows and
--    its old rows go stale instead of mixing two processes' counters. SQLite cannot change
--    a UNIQUE constraint in place: the table is rebuilt with foreign keys off (so dropping
--    the old table does not cascade into route_samples / route_rollups), in one
--    transaction; ids are kept.
-- 2. process_series: per target and instance, process figures found beside the routes in
--    the same scrape (CPU, memory, threads, GC, open files, uptime; see
--    server/routes/process.rs for the metric names), at scrape resolution (0) and summed
--    into 1 min / 10 min / 1 h buckets, with the routes' retention. mean = sum / n.

PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE routes_new (
    id               INTEGER PRIMARY KEY,
    target_id        INTEGER NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    service          TEXT    NOT NULL,
    route            TEXT    NOT NULL,
    source           TEXT    NOT NULL,
    first_seen_ms    INTEGER NOT NULL,
    last_seen_ms     INTEGER NOT NULL,
    last_exchange_ms INTEGER,
    state            TEXT,
    instance         TEXT    NOT NULL DEFAULT '',   -- '' = the target's instance
    UNIQUE (target_id, service, route, source, instance)
);

INSERT INTO routes_new (id, target_id, service, route, source, first_seen_ms, last_seen_ms,
                        last_exchange_ms, state, instance)
SELECT id, target_id, service, route, source, first_seen_ms, last_seen_ms,
       last_exchange_ms, state, ''
FROM routes;

DROP TABLE routes;

ALTER TABLE routes_new RENAME TO routes;

CREATE TABLE process_series (
    target_id     INTEGER NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    instance      TEXT    NOT NULL,                 -- as shown (never '')
    metric        TEXT    NOT NULL,                 -- cpu_pct, rss_bytes, heap_used_bytes, …
    resolution_ms INTEGER NOT NULL,                 -- 0 (per scrape), 60000, 600000, 3600000
    bucket_ms     INTEGER NOT NULL,                 -- the scrape, or the bucket start
    sum           REAL    NOT NULL,
    n             INTEGER NOT NULL,
    max           REAL    NOT NULL,
    PRIMARY KEY (target_id, instance, metric, resolution_ms, bucket_ms)
) WITHOUT ROWID;
CREATE INDEX process_series_bucket ON process_series (resolution_ms, bucket_ms);

COMMIT;

PRAGMA foreign_keys = ON;
