-- The steps of a route (Camel's processors, read through Jolokia beside the routes) and
-- their figures at the routes' resolutions: one row per step per scrape (what happened
-- since the previous scrape, counter resets handled), and the same summed into 1 min,
-- 10 min and 1 h buckets by scrape time. Retention is the routes'. Times are unix epoch
-- milliseconds (UTC); durations seconds.
--
-- routes.route_group: the group the source puts the route in (Camel's routeGroup), not
-- part of the route's identity.

ALTER TABLE routes ADD COLUMN route_group TEXT;

CREATE TABLE route_steps (
    id            INTEGER PRIMARY KEY,
    route_id      INTEGER NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    step          TEXT    NOT NULL,             -- the processor's id in the route (to1)
    kind          TEXT    NOT NULL,             -- to | choice | when | split | log | …
    parent        TEXT,                         -- the step it is nested in; NULL at the top
    position      INTEGER NOT NULL,             -- depth-first position (Camel's Index)
    level         INTEGER NOT NULL,             -- nesting depth, 1 at the top
    destination   TEXT,                         -- a send step's endpoint URI
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL,
    UNIQUE (route_id, step)
);

CREATE TABLE step_samples (
    step_id        INTEGER NOT NULL REFERENCES route_steps (id) ON DELETE CASCADE,
    at_ms          INTEGER NOT NULL,
    interval_ms    INTEGER NOT NULL,
    exchanges      REAL,
    failed         REAL,
    duration_sum_s REAL,
    duration_count REAL,
    max_s          REAL,
    inflight       REAL,
    PRIMARY KEY (step_id, at_ms)
) WITHOUT ROWID;
CREATE INDEX step_samples_at ON step_samples (at_ms);

CREATE TABLE step_rollups (
    step_id        INTEGER NOT NULL REFERENCES route_steps (id) ON DELETE CASCADE,
    resolution_ms  INTEGER NOT NULL,
    bucket_ms      INTEGER NOT NULL,
    interval_ms    INTEGER NOT NULL,
    intervals      INTEGER NOT NULL,
    exchanges      REAL,
    failed         REAL,
    duration_sum_s REAL,
    duration_count REAL,
    max_s          REAL,
    inflight_sum   REAL,
    inflight_n     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (step_id, resolution_ms, bucket_ms)
) WITHOUT ROWID;
CREATE INDEX step_rollups_bucket ON step_rollups (resolution_ms, bucket_ms);
