-- Load-test runs and their aggregates. Raw samples are never stored: a run keeps its
-- statistics per label, its per-second buckets (with HDR histograms), its grouped errors
-- and the rows its import rejected. Timestamps are unix epoch milliseconds (UTC).

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    name           TEXT    NOT NULL,
    scenario       TEXT,
    tool           TEXT    NOT NULL,           -- jmeter, ab, ...
    source         TEXT,                       -- file name the run was imported from
    status         TEXT    NOT NULL DEFAULT 'complete',  -- complete | live
    summary_only   INTEGER NOT NULL DEFAULT 0, -- 1: figures as reported by the tool
    started_at_ms  INTEGER,                    -- first sample start
    ended_at_ms    INTEGER,                    -- last sample end
    imported_at_ms INTEGER NOT NULL,
    rejected_rows  INTEGER NOT NULL DEFAULT 0,
    notes          TEXT,
    reported       TEXT    NOT NULL DEFAULT '{}'  -- JSON: figures the tool reported beyond the statistics
);
CREATE INDEX runs_started ON runs (started_at_ms);
CREATE INDEX runs_scenario ON runs (scenario, started_at_ms);

CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT    NOT NULL,
    value  TEXT    NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- One row per scope: label_ord 0 is the run total (label NULL), 1.. the labels in order of
-- first appearance.
CREATE TABLE run_stats (
    run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    label_ord      INTEGER NOT NULL,
    label          TEXT,
    is_transaction INTEGER NOT NULL DEFAULT 0,
    count          INTEGER NOT NULL,
    errors         INTEGER NOT NULL,
    min_ms         REAL,
    mean_ms        REAL,
    max_ms         REAL,
    p50_ms         REAL,
    p90_ms         REAL,
    p95_ms         REAL,
    p99_ms         REAL,
    first_start_ms INTEGER,
    last_end_ms    INTEGER,
    window_ms      INTEGER,
    throughput_rps REAL,
    bytes_received INTEGER NOT NULL DEFAULT 0,
    bytes_sent     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, label_ord)
) WITHOUT ROWID;

-- Samples that started in one second, per scope (label_ord as in run_stats).
CREATE TABLE run_buckets (
    run_id       INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    label_ord    INTEGER NOT NULL,
    start_ms     INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    errors       INTEGER NOT NULL,
    sum_ms       INTEGER NOT NULL,
    min_ms       INTEGER NOT NULL,
    max_ms       INTEGER NOT NULL,
    active_users INTEGER,
    histogram    BLOB    NOT NULL,             -- HdrHistogram V2 serialization, ms
    PRIMARY KEY (run_id, label_ord, start_ms)
) WITHOUT ROWID;

CREATE TABLE run_errors (
    run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    label         TEXT    NOT NULL,
    response_code TEXT    NOT NULL,
    message       TEXT    NOT NULL,
    count         INTEGER NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL
);
CREATE INDEX run_errors_run ON run_errors (run_id, count DESC);

CREATE TABLE run_rejected (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    line   INTEGER NOT NULL,
    reason TEXT    NOT NULL
);
CREATE INDEX run_rejected_run ON run_rejected (run_id, line);
