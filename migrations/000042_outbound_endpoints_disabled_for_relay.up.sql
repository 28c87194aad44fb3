SET lock_timeout = '5s';

-- The relay exports aegis_outbound_endpoints_disabled{reason} from the
-- database (AegisOutboundEndpointDisabled pages while an endpoint it
-- disabled stays disabled, and resolves when an operator enables or deletes
-- it): it reads who disabled an endpoint and why. Columns are appended, so
-- the view keeps its grants.
CREATE OR REPLACE VIEW outbound_endpoints_for_relay AS
SELECT id, url, event_types, rate_limit, secret, previous_secret, previous_secret_expires_at, legacy_secret,
       enabled, enabled_at, deleted_at, disabled_by, disabled_reason
FROM outbound_endpoints;
