// Package logging builds the JSON slog logger every Aegis service uses and
// carries the correlation id through context.Context.
//
// A correlation id is minted where work enters the system (a webhook, a payout
// request), stored with the outbox row, sent as a Kafka header and restored by
// each consumer, so one id follows a payment across all four services. Any
// log call made with a context (logger.InfoContext(ctx, ...)) gets the
// correlation_id attribute without the caller passing it.
//
// Secrets never go through here deliberately: callers log identifiers
// (event ids, payout ids), never request bodies, signatures or keys.
package logging
