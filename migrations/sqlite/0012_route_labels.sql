-- no-transaction
-- Service identity: a route's service is its target's (the target's `service` label, else
-- its configured name); labels of the series that name the application are kept beside
-- it in `labels` (a JSON object with sorted keys, '{}' = none; e.g.
-- {"camel_context":"inventory-bridge"}), and are part of the route's identity, so two
-- Camel contexts on one target keep their routes apart.
--
-- Rows written before: a Camel (Micrometer or Jolokia) route's service was its Camel
-- context and a Spring route's the `application` label. Those rows are moved under their
-- target's service with the old name as `camel_context` / `application`, so their figures
-- carry on under the same route ids when the next scrape writes the new identity. HTTP
-- rows are left as they are: the old rule took the first of the series' `service`,
-- `application` or `job` labels and which one it was is not stored; a row whose service
-- differs from its target's goes stale and new rows start under the target's service.
--
-- SQLite cannot change a UNIQUE constraint in place: the table is rebuilt with foreign
-- keys off (so dropping the old table does not cascade into route_samples /
-- route_rollups), in one transaction; ids are kept.

PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE routes_new (
    id               INTEGER PRIMARY KEY,
    target_id        INTEGER NOT NULL REFERENCES targets (id) ON DELETE CASCADE,
    service          TEXT    NOT NULL,
    route            TEXT    NOT NULL,
    source           TEXT    NOT NULL,
    first_seen_ms    INTEGER NOT NULL,
    last_seen_ms     INTEGER NOT NULL,
    last_exchange_ms INTEGER,
    state            TEXT,
    instance         TEXT    NOT NULL DEFAULT '',   -- '' = the target's instance
    labels           TEXT    NOT NULL DEFAULT '{}', -- JSON object beside the service
    UNIQUE (target_id, service, route, source, instance, labels)
);

INSERT INTO routes_new (id, target_id, service, route, source, first_seen_ms, last_seen_ms,
                        last_exchange_ms, state, instance, labels)
SELECT r.id, r.target_id,
       CASE WHEN r.source IN ('camel', 'jolokia', 'spring') AND r.service <> s.service
            THEN s.service ELSE r.service END,
       r.route, r.source, r.first_seen_ms, r.last_seen_ms, r.last_exchange_ms, r.state,
       r.instance,
       CASE WHEN r.source IN ('camel', 'jolokia') AND r.service <> s.service
                 AND r.service <> 'camel' -- the old name of a context without a name
            THEN '{"camel_context":' || json_quote(r.service) || '}'
            WHEN r.source = 'spring' AND r.service <> s.service
            THEN '{"application":' || json_quote(r.service) || '}'
            ELSE '{}' END
FROM routes r
JOIN (SELECT id, COALESCE(json_extract(labels, '$.service'), name) AS service
      FROM targets) s ON s.id = r.target_id;

DROP TABLE routes;

ALTER TABLE routes_new RENAME TO routes;

COMMIT;

PRAGMA foreign_keys = ON;
