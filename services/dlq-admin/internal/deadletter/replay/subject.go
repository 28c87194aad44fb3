package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

// Subject states of a no-op replay that are not a payout's state.
const (
	// StateCredited: the payment the event reports is already in the ledger.
	StateCredited = "CREDITED"
	// StateSuperseded: the payout is in NEEDS_REVIEW and a newer letter of
	// its commands exists; only the newest resumes it.
	StateSuperseded = "SUPERSEDED"
)

// noopState says whether replaying d would change nothing, and why: the
// state of its subject ("" when a replay has work to do, or when it cannot
// tell, in which case the letter is republished and the consumers'
// idempotency decides). See the package doc.
func noopState(ctx context.Context, q *sqlcdb.Queries, d store.DeadLetter) (string, error) {
	switch d.OriginalTopic {
	case kafkax.TopicTransactions:
		if state, ok, err := resolutionState(ctx, q, d.Payload); ok || err != nil {
			return state, err
		}
		var cmd event.PayoutRequested
		if json.Unmarshal(d.Payload, &cmd) != nil || cmd.PayoutID == "" {
			return "", nil
		}
		status, err := payoutStatus(ctx, q, cmd.PayoutID)
		if err != nil {
			return "", err
		}
		if payoutstate.Status(status) == payoutstate.NeedsReview {
			// Each replay of a letter resumes a NEEDS_REVIEW payout, and a
			// resume that is refused again parks it with a new letter: a
			// payout with several letters (its retries lost, then its
			// deadline's escalation) replayed together would be sent once
			// per letter and end with one open letter per replay. Only the
			// newest letter of the payout resumes it; an older one is
			// closed as superseded.
			newer, err := q.NewerPayoutLetter(ctx, sqlcdb.NewerPayoutLetterParams{ID: d.ID, Topic: d.OriginalTopic, PayoutID: cmd.PayoutID})
			if err != nil {
				return "", fmt.Errorf("look up newer letters of payout %s: %w", cmd.PayoutID, err)
			}
			if newer > 0 {
				return StateSuperseded, nil
			}
			return "", nil
		}
		// payout-worker ignores a command for a payout in such a state
		// (final, or at the PSP, whose outcome webhook settles it).
		if !payoutstate.Status(status).IgnoresCommands() {
			return "", nil
		}
		return status, nil
	case kafkax.TopicWebhookPending:
		var e event.PSPEvent
		if json.Unmarshal(d.Payload, &e) != nil || e.Provider == "" || e.EventID == "" {
			return "", nil
		}
		switch e.Action {
		case event.ActionCredit:
			if e.Reference == "" {
				return "", nil
			}
			posted, err := q.CreditPosted(ctx, e.Provider+":"+e.Reference)
			if err != nil {
				return "", fmt.Errorf("look up credit %s:%s: %w", e.Provider, e.Reference, err)
			}
			if posted {
				return StateCredited, nil
			}
		case event.ActionPayoutPaid, event.ActionPayoutFailed, event.ActionPayoutReversed:
			id, ok := payoutUUID(e.PayoutID)
			if !ok {
				return "", nil
			}
			status, err := q.EvidenceApplied(ctx, sqlcdb.EvidenceAppliedParams{PayoutID: id, Provider: e.Provider, EventID: e.EventID})
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			if err != nil {
				return "", fmt.Errorf("look up evidence %s:%s for payout %s: %w", e.Provider, e.EventID, e.PayoutID, err)
			}
			return status, nil
		}
	}
	return "", nil
}

// payoutStatus is payout id's state, "" when there is no such payout (a
// replay republishes, and the worker dead-letters it again as unknown).
func payoutStatus(ctx context.Context, q *sqlcdb.Queries, payoutID string) (string, error) {
	id, ok := payoutUUID(payoutID)
	if !ok {
		return "", nil
	}
	status, err := q.PayoutStatus(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up payout %s: %w", payoutID, err)
	}
	return status, nil
}

// payoutUUID parses a payout id; payouts.id is a uuid, and a malformed id
// must not become a query error.
// pgtype parses it, as pgx did when the id was a query argument.
func payoutUUID(s string) (uuid.UUID, bool) {
	var u pgtype.UUID
	if err := u.Scan(s); err != nil || !u.Valid {
		return uuid.UUID{}, false
	}
	return uuid.UUID(u.Bytes), true
}

// Prediction is what a replay of an open letter would do now.
type Prediction struct {
	// Outcome is store.OutcomeRepublished, store.OutcomeNoop, or "" when
	// the letter cannot be replayed (Error says why).
	Outcome      string
	SubjectState string
	Error        string
}

// Predict says what replaying open letter d would do now, changing
// nothing: the same decision Replay takes, so an operator sees a no-op (or
// a refusal) coming before acting. For a letter that is not open it
// returns the zero Prediction.
func (s *Service) Predict(ctx context.Context, d store.DeadLetter) (_ Prediction, err error) {
	defer fault.Mark(&err, what)
	if d.Status != store.StatusOpen {
		return Prediction{}, nil
	}
	if _, err := Message(d); err != nil {
		return Prediction{Error: err.Error()}, nil
	}
	state, err := noopState(ctx, s.q, d)
	if err != nil {
		return Prediction{}, fmt.Errorf("predict replay of dead letter %d: %w", d.ID, err)
	}
	if state != "" {
		return Prediction{Outcome: store.OutcomeNoop, SubjectState: state}, nil
	}
	return Prediction{Outcome: store.OutcomeRepublished}, nil
}
