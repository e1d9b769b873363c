-- Route histogram buckets in their compact binary form (server/store/route_buckets.rs):
-- the columns become BYTEA. Rows written before keep their JSON text as its UTF-8 bytes,
-- which the store still reads (it starts with `[`). Rewrites both tables once.
ALTER TABLE route_samples ALTER COLUMN buckets TYPE BYTEA USING convert_to(buckets, 'UTF8');
ALTER TABLE route_rollups ALTER COLUMN buckets TYPE BYTEA USING convert_to(buckets, 'UTF8');
