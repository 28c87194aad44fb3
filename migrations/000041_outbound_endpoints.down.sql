SET lock_timeout = '5s';

DROP FUNCTION recover_outbound_endpoint(uuid, timestamptz, integer);
DROP FUNCTION resend_outbound_message(bigint, uuid);
DROP FUNCTION resend_outbound_delivery(bigint);
DROP FUNCTION disable_outbound_endpoint(uuid, text);
DROP VIEW outbound_endpoint_health_for_ops, outbound_attempts_for_ops, outbound_deliveries_for_ops,
    outbound_messages_for_ops, outbound_endpoints_for_relay;
DROP TABLE outbound_endpoint_health, outbound_attempts, outbound_deliveries, outbound_messages,
    outbound_user_sequences, outbound_endpoints;
