-- Alerts, second part: silences, channels added at run time, Alertmanager-style
-- notification groups (the dispatcher's aggregation groups and its notification log), and
-- live runs failed by an alert rule. Timestamps are unix epoch milliseconds (UTC).

-- Silences (Alertmanager's model): an alert whose labels match every matcher is not
-- notified between starts_at_ms and ends_at_ms. Expiring a silence sets ends_at_ms to now.
CREATE TABLE silences (
    id             INTEGER PRIMARY KEY,
    matchers       TEXT    NOT NULL,              -- JSON [{"name","value","op"}]
    starts_at_ms   INTEGER NOT NULL,
    ends_at_ms     INTEGER NOT NULL,
    comment        TEXT    NOT NULL,
    created_by     TEXT    NOT NULL DEFAULT '',
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);
CREATE INDEX silences_ends ON silences (ends_at_ms);

-- Channels added through the API (those of harrier.toml are not stored).
CREATE TABLE alert_channels (
    name           TEXT    PRIMARY KEY,
    body           TEXT    NOT NULL,              -- the channel as JSON (notify::ChannelSpec)
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);

-- One aggregation group per channel and group key (Alertmanager's dispatcher), with the
-- last notification sent for it (Alertmanager's notification log), so a restart neither
-- re-sends nor loses a notification.
CREATE TABLE alert_groups (
    channel            TEXT    NOT NULL,
    group_key          TEXT    NOT NULL,          -- {}:{alertname="X"}
    group_labels       TEXT    NOT NULL,          -- JSON object
    created_at_ms      INTEGER NOT NULL,
    next_flush_ms      INTEGER NOT NULL,          -- group_wait, then every group_interval
    notified_at_ms     INTEGER,                   -- last notification; NULL: none yet
    notified_firing    TEXT    NOT NULL DEFAULT '[]',  -- fingerprints in it, JSON
    notified_resolved  TEXT    NOT NULL DEFAULT '[]',
    attempts           INTEGER NOT NULL DEFAULT 0,     -- failed attempts of this flush
    last_error         TEXT,
    PRIMARY KEY (channel, group_key)
);

-- The alerts of a group: firing ones, and resolved ones until they have been flushed.
CREATE TABLE alert_group_alerts (
    channel        TEXT    NOT NULL,
    group_key      TEXT    NOT NULL,
    fingerprint    TEXT    NOT NULL,
    rule           TEXT    NOT NULL,
    labels         TEXT    NOT NULL,              -- JSON, with alertname and severity
    value          REAL,
    starts_at_ms   INTEGER NOT NULL,
    ends_at_ms     INTEGER,                       -- NULL while firing
    notified       INTEGER NOT NULL DEFAULT 0,    -- alertmanager channels: sent while firing
    PRIMARY KEY (channel, fingerprint)
);
CREATE INDEX alert_group_alerts_group ON alert_group_alerts (channel, group_key);

-- The delivery log of group notifications: one row per attempt.
CREATE TABLE alert_group_deliveries (
    id         INTEGER PRIMARY KEY,
    channel    TEXT    NOT NULL,
    group_key  TEXT    NOT NULL,
    at_ms      INTEGER NOT NULL,
    firing     INTEGER NOT NULL,                  -- alerts in the message, by status
    resolved   INTEGER NOT NULL,
    status     INTEGER,                           -- HTTP status, NULL when no answer
    error      TEXT
);
CREATE INDEX alert_group_deliveries_at ON alert_group_deliveries (at_ms);

-- A live run failed by a scenario rule (k6 abort-on-fail thresholds in spirit).
ALTER TABLE runs ADD COLUMN failed_rule TEXT;
ALTER TABLE runs ADD COLUMN failed_at_ms INTEGER;
ALTER TABLE runs ADD COLUMN failed_value REAL;

-- The alert evaluator sums every route's intervals over its rules' windows in one query
-- (Store::route_window_figures); this covering index lets that query read only the
-- window's index entries, not the table rows with their bucket JSON.
CREATE INDEX route_samples_window ON route_samples
    (at_ms, route_id, interval_ms, exchanges, failed, duration_sum_s, duration_count, max_s, inflight);
