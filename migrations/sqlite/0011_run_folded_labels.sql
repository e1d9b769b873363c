-- Distinct labels beyond a run's label limit ([limits] max_labels in harrier.toml): their
-- samples are stored under the label "(other labels)", and this says how many were folded
-- (0: none), so the run page and GET /api/v1/runs/{id} can say so.
ALTER TABLE runs ADD COLUMN folded_labels INTEGER NOT NULL DEFAULT 0;
