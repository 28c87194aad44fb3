package api

import (
	"net/http"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
)

// uuidPattern is a payout id: payouts.id is a UUID.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// payoutView is the payout a letter is about, for the person deciding what
// to do with the letter: its state, transitions, destination and PSP calls.
type payoutView struct {
	ID            string                 `json:"id"`
	UserID        string                 `json:"user_id"`
	Amount        int64                  `json:"amount"`
	Currency      string                 `json:"currency"`
	Provider      string                 `json:"provider"`
	Destination   string                 `json:"destination"`
	DestinationID *string                `json:"destination_id"`
	Status        string                 `json:"status"`
	Attempts      int                    `json:"attempts"`
	PSPReference  *string                `json:"psp_reference"`
	PSPStatus     *string                `json:"psp_status"`
	LastError     *string                `json:"last_error"`
	ErrorClass    *string                `json:"error_class"`
	CorrelationID string                 `json:"correlation_id"`
	CreatedAt     time.Time              `json:"created_at"`
	UpdatedAt     time.Time              `json:"updated_at"`
	Transitions   []payoutTransitionView `json:"transitions"`
	PSPAttempts   []payoutAttemptView    `json:"psp_attempts"`
}

type payoutTransitionView struct {
	From       *string   `json:"from"`
	To         string    `json:"to"`
	Attempt    int       `json:"attempt"`
	Error      *string   `json:"error"`
	ErrorClass *string   `json:"error_class"`
	At         time.Time `json:"at"`
}

type payoutAttemptView struct {
	Attempt      int       `json:"attempt"`
	Kind         string    `json:"kind"`
	Outcome      string    `json:"outcome"`
	PSPReference *string   `json:"psp_reference"`
	Error        *string   `json:"error"`
	At           time.Time `json:"at"`
}

func newPayoutView(p payouts.Payout) payoutView {
	v := payoutView{
		ID: p.ID, UserID: p.UserID, Amount: p.Amount, Currency: p.Currency, Provider: p.Provider,
		Destination: p.Destination, DestinationID: p.DestinationID, Status: p.Status, Attempts: p.Attempts,
		PSPReference: p.PSPReference, PSPStatus: p.PSPStatus, LastError: p.LastError, ErrorClass: p.ErrorClass,
		CorrelationID: p.CorrelationID, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
		Transitions: make([]payoutTransitionView, 0, len(p.Transitions)),
		PSPAttempts: make([]payoutAttemptView, 0, len(p.PSPAttempts)),
	}
	for _, t := range p.Transitions {
		v.Transitions = append(v.Transitions, payoutTransitionView{From: t.From, To: t.To, Attempt: t.Attempt,
			Error: t.Error, ErrorClass: t.ErrorClass, At: t.At.UTC()})
	}
	for _, a := range p.PSPAttempts {
		v.PSPAttempts = append(v.PSPAttempts, payoutAttemptView{Attempt: a.Attempt, Kind: a.Kind, Outcome: a.Outcome,
			PSPReference: a.PSPReference, Error: a.Error, At: a.At.UTC()})
	}
	return v
}

func (a *api) payout(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !uuidPattern.MatchString(id) {
		a.fail(w, r, &input.Invalid{Param: "id", Reason: "must be a payout id (a UUID)"})
		return
	}
	p, err := a.Payouts.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newPayoutView(p))
}
