package handler

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/hmacsig"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// unproven reports whether e moves money without a valid proof that
// webhook-api verified it (pkg/eventproof); if so it has dead-lettered the
// message as eventproof.Class, moving nothing, and err is the outcome of
// doing so. dlq-admin pages for the letter once it stores it.
func (h *Handler) unproven(ctx context.Context, m inbox.Message, e event.PSPEvent) (bool, error) {
	if !eventproof.Required(e.Action) {
		return false, nil
	}
	problem := fmt.Errorf("%w: the worker holds no key", eventproof.ErrUnproven)
	if h.proof != nil {
		if problem = h.proof.Verify(e, m.Headers[eventproof.Header]); problem == nil {
			return false, nil
		}
	}
	problem = fmt.Errorf("%s: %s %s %s (%s): %w", eventproof.Class, e.Provider, e.Type, e.EventID, e.Action, problem)
	stored := false
	err := inbox.InTx(ctx, h.pool, refusal(m), func(tx pgx.Tx) error {
		stored = true
		return h.letters.Stage(ctx, tx, m.Letter().WithFailure(dlq.Failure{Err: problem, Class: eventproof.Class}, h.now()))
	})
	if err != nil {
		return true, err
	}
	h.unprovenCount.WithLabelValues(e.Provider, string(e.Action)).Inc()
	if stored {
		h.logger.Warn("money event without a valid proof of verification dead-lettered; it moved nothing",
			"provider", e.Provider, "event_id", e.EventID, "action", string(e.Action), "error", problem.Error())
		h.notify.Notify()
	}
	return true, nil
}

// refusal is m under the identity its refusal is recorded with: its
// message id and a digest of its value and proof. Claiming m's own id
// would let a forger who knows a genuine event's id (they are the PSP's
// ids) produce a forgery first and have the genuine event skipped as a
// duplicate; the digest still keeps one redelivered forgery to one letter.
func refusal(m inbox.Message) inbox.Message {
	r := m
	r.Headers = maps.Clone(m.Headers)
	r.Headers[kafkax.HeaderMessageID] = m.ID() + "#unproven-" +
		hmacsig.Hex(sha256.New, []byte(eventproof.Class), m.Value, []byte{0}, []byte(m.Headers[eventproof.Header]))[:16]
	return r
}
