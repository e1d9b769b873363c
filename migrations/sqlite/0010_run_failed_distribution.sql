-- The failed samples' exact response-time distribution per scope (same encoding as
-- `distribution`; see runs::distribution), so that Apdex counts failed samples as
-- frustrated. An empty blob: the scope had no failed sample. NULL for summary-only runs
-- and for runs imported before this column existed (their failures cannot be placed, so
-- their Apdex is shown only when they had no errors).
ALTER TABLE run_stats ADD COLUMN failed_distribution BLOB;
