-- Sign-in: local users, their sessions, failed sign-ins (throttling), machine tokens,
-- read-only share links and the audit log. Secrets are never stored: passwords as
-- Argon2id PHC strings, session ids, tokens and share links as the SHA-256 of their
-- random part (hex). Times are unix epoch milliseconds (UTC).

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    password_hash TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE sessions (
    id_hash       TEXT PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- One row per failed sign-in and key: `user:NAME` and `client:ADDRESS`.
CREATE TABLE sign_in_failures (
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX sign_in_failures_key ON sign_in_failures (key, at_ms);

CREATE TABLE api_tokens (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('ingest', 'read', 'write')),
    secret_hash   TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    last_used_ms  INTEGER,
    revoked_at_ms INTEGER
);

-- subject: JSON of the shared page (`{"kind":"run","id":3}`, …).
CREATE TABLE share_links (
    id            INTEGER PRIMARY KEY,
    subject       TEXT NOT NULL,
    secret_hash   TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    revoked_at_ms INTEGER
);

-- Every state-changing request, allowed or refused.
CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY,
    at_ms     INTEGER NOT NULL,
    who       TEXT NOT NULL,
    method    TEXT NOT NULL,
    path      TEXT NOT NULL,
    status    INTEGER NOT NULL,
    client    TEXT
);
CREATE INDEX audit_log_at ON audit_log (at_ms);
