-- The relay's own SQL, compiled by sqlc into package sqlcdb. Everything it
-- does on transaction_outbox goes through pkg/outbox's store; what is left
-- is the wake-up connection's LISTEN. A channel is an identifier, never a
-- parameter, so the name is spelled here: it must be outbox.NotifyChannel
-- (TestANotificationWakesTheRelayLongBeforeItsPoll fails otherwise).

-- name: Listen :exec
LISTEN aegis_outbox;
