-- Exact response-time distribution per scope (distinct elapsed ms values with counts,
-- LEB128-encoded; see runs::distribution). NULL for summary-only runs and for runs
-- imported before this column existed.
ALTER TABLE run_stats ADD COLUMN distribution BLOB;
