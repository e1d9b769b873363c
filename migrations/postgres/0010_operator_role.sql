-- The SQLite migration 0020_operator_role.sql on PostgreSQL: the operator role (starts,
-- stops, suspends and resumes routes and resets their statistics) and the `operate`
-- token scope. The constraints carry PostgreSQL's own names for 0003's column checks.

ALTER TABLE users DROP CONSTRAINT users_role_check;
ALTER TABLE users ADD CONSTRAINT users_role_check
    CHECK (role IN ('viewer', 'operator', 'editor', 'admin'));

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_scope_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_scope_check
    CHECK (scope IN ('ingest', 'read', 'operate', 'write'));
