SET lock_timeout = '5s';

DROP VIEW outbound_endpoints_for_relay;
CREATE VIEW outbound_endpoints_for_relay AS
SELECT id, url, event_types, rate_limit, secret, previous_secret, previous_secret_expires_at, legacy_secret,
       enabled, enabled_at, deleted_at
FROM outbound_endpoints;
GRANT SELECT ON outbound_endpoints_for_relay TO aegis_outbox_relay;
