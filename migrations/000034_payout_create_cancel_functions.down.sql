DROP FUNCTION cancel_payout(uuid, text);
DROP FUNCTION create_payout(uuid, text, text, text, text, bigint, text, text, text, text, uuid);
