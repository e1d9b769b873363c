-- The operator role (starts, stops, suspends and resumes routes and resets their
-- statistics) and the `operate` token scope.
--
-- SQLite cannot change a CHECK constraint in place, so `users` and `api_tokens` are
-- rebuilt (SQLite's documented procedure: new table, copy, drop, rename). `sessions`
-- refers to `users` with ON DELETE CASCADE: it is set aside and put back around the
-- rebuild, so dropping the old `users` deletes no session and nobody is signed out.

CREATE TABLE users_next (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'editor', 'admin')),
    password_hash TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    oidc_subject  TEXT
);
INSERT INTO users_next (id, name, role, password_hash, created_at_ms, oidc_subject)
    SELECT id, name, role, password_hash, created_at_ms, oidc_subject FROM users;

CREATE TABLE sessions_kept AS SELECT id_hash, user_id, created_at_ms, last_seen_ms FROM sessions;
DROP TABLE sessions;
DROP TABLE users;
ALTER TABLE users_next RENAME TO users;
CREATE UNIQUE INDEX users_oidc_subject ON users (oidc_subject);

CREATE TABLE sessions (
    id_hash       TEXT PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);
INSERT INTO sessions (id_hash, user_id, created_at_ms, last_seen_ms)
    SELECT id_hash, user_id, created_at_ms, last_seen_ms FROM sessions_kept;
DROP TABLE sessions_kept;

CREATE TABLE api_tokens_next (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('ingest', 'read', 'operate', 'write')),
    secret_hash   TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    last_used_ms  INTEGER,
    revoked_at_ms INTEGER
);
INSERT INTO api_tokens_next
    SELECT id, name, scope, secret_hash, created_by, created_at_ms, expires_at_ms,
           last_used_ms, revoked_at_ms FROM api_tokens;
DROP TABLE api_tokens;
ALTER TABLE api_tokens_next RENAME TO api_tokens;
