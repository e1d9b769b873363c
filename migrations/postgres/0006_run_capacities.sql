-- A run's saturation analysis (its capacity), kept once computed.
--
-- Finding a run's capacity reads every per-second bucket of the run (a 10⁸-sample run has
-- over half a million), so comparisons and run pages read it from here instead. `key` names
-- what it was computed from: the capacity rule's version and the run's status, request and
-- error counts and first/last times; a row whose key no longer matches is computed again.
-- Writes that replace a run's buckets delete its row. `capacity` is JSON (`null`: the run
-- has no capacity, e.g. its load did not ramp).

CREATE TABLE run_capacities (
    run_id   BIGINT  PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    key      TEXT    NOT NULL,
    capacity TEXT    NOT NULL
);
