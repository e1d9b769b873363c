-- A run's bootstrap draws per scope (label_ord as in run_stats), computed when the run is
-- stored so that a comparison reads one small blob per run and label instead of every
-- per-second bucket (see compare::stored for the format). Runs stored before this table
-- existed, and live runs until they complete, have no rows: a comparison then resamples
-- their buckets and writes the rows.
CREATE TABLE run_resamples (
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    label_ord INTEGER NOT NULL,
    draws     BLOB    NOT NULL,
    PRIMARY KEY (run_id, label_ord)
) WITHOUT ROWID;
