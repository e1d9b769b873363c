-- Threshold alerts: rules (built-in, from harrier.toml, or added at run time through the
-- API), the active alerts with their timers, the history of transitions, and the outbox of
-- notifications. Alert states and outbox rows are written in the same transaction as the
-- evaluation that produced them, so a restart neither re-sends nor loses a notification.
-- Timestamps are unix epoch milliseconds (UTC).

CREATE TABLE alert_rules (
    name           TEXT    PRIMARY KEY,
    body           TEXT    NOT NULL,              -- the rule as JSON (alerts::rule::Rule)
    origin         TEXT    NOT NULL,              -- builtin | config | api
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    deleted_at_ms  INTEGER                        -- a deleted built-in rule stays deleted
);

-- Active alerts (pending or firing); inactive alerts have no row. Identity: rule + labels.
CREATE TABLE alerts (
    rule                  TEXT    NOT NULL,
    labels                TEXT    NOT NULL,       -- JSON object, keys sorted
    state                 TEXT    NOT NULL,       -- pending | firing
    value                 REAL,
    active_since_ms       INTEGER NOT NULL,       -- start of pending
    fired_at_ms           INTEGER,
    keep_firing_since_ms  INTEGER,                -- first false evaluation while firing
    last_eval_ms          INTEGER NOT NULL,
    PRIMARY KEY (rule, labels)
);

-- Every transition: pending, firing, resolved, inactive (pending that cleared).
CREATE TABLE alert_history (
    id      INTEGER PRIMARY KEY,
    rule    TEXT    NOT NULL,
    labels  TEXT    NOT NULL,
    change  TEXT    NOT NULL,
    value   REAL,
    at_ms   INTEGER NOT NULL
);
CREATE INDEX alert_history_at ON alert_history (at_ms);

-- One row per notice (an episode fired, an episode resolved), delivered to every channel.
CREATE TABLE alert_notifications (
    id               INTEGER PRIMARY KEY,
    rule             TEXT    NOT NULL,
    labels           TEXT    NOT NULL,
    change           TEXT    NOT NULL,            -- firing | resolved
    value            REAL,
    started_at_ms    INTEGER NOT NULL,            -- when the episode fired
    ended_at_ms      INTEGER,                     -- resolved: when
    created_at_ms    INTEGER NOT NULL,
    delivered_at_ms  INTEGER,                     -- NULL: still to send
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms  INTEGER NOT NULL DEFAULT 0,  -- retry with backoff: not before this
    last_error       TEXT
);
CREATE INDEX alert_notifications_undelivered ON alert_notifications (delivered_at_ms, id);

-- The delivery log: one row per attempt per channel.
CREATE TABLE alert_deliveries (
    id               INTEGER PRIMARY KEY,
    notification_id  INTEGER NOT NULL REFERENCES alert_notifications (id) ON DELETE CASCADE,
    channel          TEXT    NOT NULL,
    at_ms            INTEGER NOT NULL,
    status           INTEGER,                     -- HTTP status, NULL when no answer
    error            TEXT
);
