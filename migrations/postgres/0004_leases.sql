-- The SQLite migration 0014_leases.sql on PostgreSQL: which replica does a job that only
-- one may do at a time (`alerts`), with a term number that grows at every change of
-- holder (fencing).
CREATE TABLE leases (
    name          TEXT COLLATE "C" PRIMARY KEY,
    holder        TEXT COLLATE "C" NOT NULL,
    term          BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
