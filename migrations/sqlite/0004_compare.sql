-- Run comparison: the pinned baseline of each scenario, and the results of `harrier check`.

-- The run a scenario's later runs are judged against when it is pinned (at most one per
-- scenario). Without a row, `auto` means the latest earlier run that passed its check.
CREATE TABLE baselines (
    scenario     TEXT    PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    pinned_at_ms INTEGER NOT NULL
);

-- One row per `harrier check` of a run: pass/fail and the gate results (JSON array).
CREATE TABLE run_checks (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    baseline_run_id INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    passed          INTEGER NOT NULL,
    checked_at_ms   INTEGER NOT NULL,
    results         TEXT    NOT NULL DEFAULT '[]'
);
CREATE INDEX run_checks_run ON run_checks (run_id, id);
