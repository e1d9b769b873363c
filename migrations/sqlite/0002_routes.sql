-- Route monitoring: scrape targets, the routes found on them, and route figures at three
-- resolutions. Figures are increases over an interval (counter resets already handled),
-- so any range sums them: rate = Σ exchanges / Σ interval_ms. Timestamps are unix epoch
-- milliseconds (UTC). Retention (raw 48 h, 1 min 30 days, 1 h 1 year by default) is
-- applied by the scraper, not here.

CREATE TABLE targets (
    id               INTEGER PRIMARY KEY,
    name             TEXT    NOT NULL UNIQUE,
    url              TEXT    NOT NULL,
    kind             TEXT    NOT NULL,             -- prometheus | jolokia
    interval_s       REAL    NOT NULL,
    timeout_s        REAL    NOT NULL,
    labels           TEXT    NOT NULL DEFAULT '{}', -- JSON object of extra labels
    origin           TEXT    NOT NULL DEFAULT 'api', -- api | config | builtin
    created_at_ms    INTEGER NOT NULL,
    up               INTEGER,                      -- last scrape: 1 answered, 0 failed, NULL never
    last_scrape_ms   INTEGER,
    last_duration_ms REAL,
    last_samples     INTEGER,                      -- samples (attributes for Jolokia) read
    last_error       TEXT
);

-- A route as found on one target: (service, route, source) is its identity there.
CREATE TABLE routes (
    id               INTEGER PRIMARY KEY,
    target_id        INTEGER NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    service          TEXT    NOT NULL,
    route            TEXT    NOT NULL,
    source           TEXT    NOT NULL,             -- camel | spring | http | jolokia
    first_seen_ms    INTEGER NOT NULL,
    last_seen_ms     INTEGER NOT NULL,             -- the last scrape that had the route
    last_exchange_ms INTEGER,                      -- the last scrape whose exchanges rose (or the source's own time)
    state            TEXT,                         -- the source's own state (Jolokia: Started, Stopped)
    UNIQUE (target_id, service, route, source)
);

-- One row per route per scrape: what happened since the previous scrape.
CREATE TABLE route_samples (
    route_id       INTEGER NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    at_ms          INTEGER NOT NULL,               -- the scrape (end of the interval)
    interval_ms    INTEGER NOT NULL,
    exchanges      REAL,                           -- NULL: the source lacks the figure
    failed         REAL,
    duration_sum_s REAL,
    duration_count REAL,
    max_s          REAL,                           -- the exporter's max at the scrape
    inflight       REAL,                           -- gauge at the scrape
    buckets        TEXT,                           -- JSON [[le, increase], …], le null = +Inf
    PRIMARY KEY (route_id, at_ms)
) WITHOUT ROWID;
CREATE INDEX route_samples_at ON route_samples (at_ms);

-- route_samples summed into 1 min (60000) and 1 h (3600000) buckets by scrape time.
CREATE TABLE route_rollups (
    route_id       INTEGER NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    resolution_ms  INTEGER NOT NULL,
    bucket_ms      INTEGER NOT NULL,               -- bucket start
    interval_ms    INTEGER NOT NULL,               -- Σ interval_ms
    intervals      INTEGER NOT NULL,               -- scrapes summed
    exchanges      REAL,
    failed         REAL,
    duration_sum_s REAL,
    duration_count REAL,
    max_s          REAL,                           -- max of the scrapes' max
    inflight_sum   REAL,                           -- Σ inflight readings (mean = / inflight_n)
    inflight_n     INTEGER NOT NULL DEFAULT 0,
    buckets        TEXT,
    PRIMARY KEY (route_id, resolution_ms, bucket_ms)
) WITHOUT ROWID;
CREATE INDEX route_rollups_bucket ON route_rollups (resolution_ms, bucket_ms);
