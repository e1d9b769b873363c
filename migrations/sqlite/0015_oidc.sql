-- Single sign-on with OpenID Connect.
--
-- users.oidc_subject: the provider's `sub` of a user made by single sign-on (NULL for a
-- local user). Such a user has no password (password_hash is empty, which no password
-- matches) and is found again by this subject, whatever name the provider later gives.
--
-- oidc_logins: sign-ins under way, between the redirect to the provider and its answer.
-- Kept in the database (not in the server's memory) so that any replica can finish one
-- another started. Keyed by the SHA-256 of the `state` parameter (hex); the nonce and the
-- PKCE verifier are single-use secrets deleted when the answer arrives or after 10
-- minutes. Times are unix epoch milliseconds (UTC).

ALTER TABLE users ADD COLUMN oidc_subject TEXT;
CREATE UNIQUE INDEX users_oidc_subject ON users (oidc_subject);

CREATE TABLE oidc_logins (
    state_hash    TEXT PRIMARY KEY,
    nonce         TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    redirect_url  TEXT NOT NULL,
    next          TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE INDEX oidc_logins_created ON oidc_logins (created_at_ms);
