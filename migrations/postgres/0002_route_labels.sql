-- Service identity: a route's service is its target's (the target's `service` label, else
-- its configured name); labels of the series that name the application are kept beside it
-- in `labels` (a JSON object with sorted keys and no spaces, as harrier writes it; '{}' =
-- none), part of the route's identity. Existing Camel and Spring rows move under their
-- target's service with the old name as `camel_context` / `application`; HTTP rows stay
-- as they were. See migrations/sqlite/0012_route_labels.sql for the reasons.

ALTER TABLE routes ADD COLUMN labels TEXT COLLATE "C" NOT NULL DEFAULT '{}';

UPDATE routes r
SET labels = CASE WHEN r.source IN ('camel', 'jolokia') AND r.service = 'camel'
                  THEN '{}' -- the old name of a context without a name
                  WHEN r.source IN ('camel', 'jolokia')
                  THEN '{"camel_context":' || to_json(r.service)::text || '}'
                  ELSE '{"application":' || to_json(r.service)::text || '}' END,
    service = s.service
FROM (SELECT id, COALESCE(labels::jsonb ->> 'service', name) AS service FROM targets) s
WHERE s.id = r.target_id
  AND r.source IN ('camel', 'jolokia', 'spring')
  AND r.service <> s.service;

ALTER TABLE routes DROP CONSTRAINT routes_target_id_service_route_source_instance_key;
ALTER TABLE routes ADD CONSTRAINT routes_identity_key
    UNIQUE (target_id, service, route, source, instance, labels);
