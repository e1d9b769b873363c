-- One row: a random key made when the database is first used by the alert notifier. It
-- makes the idempotency keys of notifications differ between databases (two installations
-- whose alerts fire alike never send the same key), while every replica sharing this
-- database — and a resend after a crash — sends the same one.
CREATE TABLE installation (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    key TEXT    NOT NULL
);
