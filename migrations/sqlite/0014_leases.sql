-- Leases: which process does a job that only one may do at a time (the alert evaluator
-- and notifier, `alerts`), with a term number that grows at every change of holder
-- (fencing: a holder whose term is no longer the row's has lost the lease).
CREATE TABLE leases (
    name          TEXT PRIMARY KEY,
    holder        TEXT NOT NULL,
    term          INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
