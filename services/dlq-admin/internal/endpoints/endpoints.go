package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the outbound endpoint store"

// Defaults of Config.
const (
	DefaultRotationOverlap = 24 * time.Hour
	DefaultRecoverRate     = 10
)

// Bounds of what an operator may set.
const (
	MaxDescription     = 1024
	MinLegacySecret    = 16
	MaxRateLimit       = 100000
	maxLegacySecret    = 1024
	maxEndpointsListed = 1000
	// MaxLimit bounds a page of deliveries, attempts or messages.
	MaxLimit = 500
)

// Audit actions and target types.
const (
	ActionCreate         = "outbound_endpoint_create"
	ActionUpdate         = "outbound_endpoint_update"
	ActionDelete         = "outbound_endpoint_delete"
	ActionDisable        = "outbound_endpoint_disable"
	ActionEnable         = "outbound_endpoint_enable"
	ActionRotate         = "outbound_endpoint_rotate_secret"
	ActionReadSecret     = "outbound_endpoint_read_secret"
	ActionRecover        = "outbound_endpoint_recover"
	ActionResendDelivery = "outbound_delivery_resend"
	ActionResendMessage  = "outbound_message_resend"
	TargetEndpoint       = "outbound_endpoint"
	TargetDelivery       = "outbound_delivery"
	TargetMessage        = "outbound_message"
)

// Delivery states.
const (
	StatePending   = "pending"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

var (
	// ErrNotFound: no undeleted endpoint with this id.
	ErrNotFound = errors.New("no outbound endpoint with this id")
	// ErrMessageNotFound: no message with this id.
	ErrMessageNotFound = errors.New("no outbound message with this id")
	// ErrDeliveryNotFound: no delivery with this id.
	ErrDeliveryNotFound = errors.New("no outbound delivery with this id")
	// ErrDelivered: the delivery succeeded; re-send its message to the
	// endpoint to send it again.
	ErrDelivered = errors.New("this delivery succeeded: re-send its message (POST /v1/outbound/messages/{id}/resend) to send it again")
)

// Config is how endpoints are checked and changed.
type Config struct {
	// Policy is OUTBOUND_ALLOW_HTTP and OUTBOUND_ALLOW_PRIVATE.
	Policy outbound.Policy
	// RotationOverlap is OUTBOUND_ROTATION_OVERLAP: how long the previous
	// secret keeps signing after a rotation.
	RotationOverlap time.Duration
	// RecoverRate is OUTBOUND_RECOVER_RATE: deliveries per second "recover
	// since" schedules.
	RecoverRate int
}

// Validate refuses settings the service cannot run with; field names are
// Config's.
func (c Config) Validate() error {
	var errs []error
	if c.RotationOverlap < time.Second {
		errs = append(errs, config.Invalid("RotationOverlap", "must be at least 1s, got %s", c.RotationOverlap))
	}
	if c.RecoverRate < 1 || c.RecoverRate > 10000 {
		errs = append(errs, config.Invalid("RecoverRate", "must be between 1 and 10000 deliveries per second, got %d", c.RecoverRate))
	}
	return errors.Join(errs...)
}

// Endpoint is an endpoint as every read shows it: no secret, its health
// and its pending deliveries.
type Endpoint struct {
	ID                      uuid.UUID  `json:"id"`
	URL                     string     `json:"url"`
	Description             string     `json:"description"`
	EventTypes              []string   `json:"event_types"`
	RateLimit               *int       `json:"rate_limit"`
	Enabled                 bool       `json:"enabled"`
	EnabledAt               time.Time  `json:"enabled_at"`
	DisabledAt              *time.Time `json:"disabled_at"`
	DisabledBy              *string    `json:"disabled_by"`
	DisabledReason          *string    `json:"disabled_reason"`
	CreatedBy               string     `json:"created_by"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
	HasLegacySecret         bool       `json:"has_legacy_secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	FailingSince            *time.Time `json:"failing_since"`
	LastSuccessAt           *time.Time `json:"last_success_at"`
	Pending                 int64      `json:"pending"`
	OldestPendingAt         *time.Time `json:"oldest_pending_at"`
}

// Created is a new endpoint and its secret (shown this once).
type Created struct {
	Endpoint
	Secret string `json:"secret"`
}

// Secret is an endpoint's current secret and when the previous one stops
// signing (nil: none signs).
type Secret struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// Delivery is one message's delivery to one endpoint.
type Delivery struct {
	ID            int64      `json:"id"`
	MessageID     int64      `json:"message_id"`
	EndpointID    uuid.UUID  `json:"endpoint_id"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt time.Time  `json:"next_attempt_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastStatus    *int       `json:"last_status"`
	LastError     *string    `json:"last_error"`
	CreatedAt     time.Time  `json:"created_at"`
	FinishedAt    *time.Time `json:"finished_at"`
}

// Attempt is one row of the delivery log.
type Attempt struct {
	ID           int64     `json:"id"`
	DeliveryID   int64     `json:"delivery_id"`
	MessageID    int64     `json:"message_id"`
	EndpointID   uuid.UUID `json:"endpoint_id"`
	Attempt      int       `json:"attempt"`
	AttemptedAt  time.Time `json:"attempted_at"`
	Outcome      string    `json:"outcome"`
	StatusCode   *int      `json:"status_code"`
	LatencyMS    int       `json:"latency_ms"`
	ResponseBody *string   `json:"response_body"`
	Error        *string   `json:"error"`
}

// Message is one event as delivered: Body is the JSON every endpoint
// receives.
type Message struct {
	ID         int64           `json:"id"`
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	UserID     string          `json:"user_id"`
	Sequence   int64           `json:"sequence"`
	OccurredAt time.Time       `json:"occurred_at"`
	CreatedAt  time.Time       `json:"created_at"`
	Body       json.RawMessage `json:"body"`
}

// MessageDetail is a message with, per endpoint, its delivery and every
// attempt.
type MessageDetail struct {
	Message
	Deliveries []DeliveryDetail `json:"deliveries"`
}

// DeliveryDetail is a delivery and its attempts, oldest first.
type DeliveryDetail struct {
	Delivery
	AttemptLog []Attempt `json:"attempt_log"`
}

// Page is a list page: NextBeforeID is the before_id of the next page,
// nil on the last.
type Page[T any] struct {
	Items        []T    `json:"items"`
	NextBeforeID *int64 `json:"next_before_id"`
}

// Service manages endpoints.
type Service struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
	cfg  Config
	now  func() time.Time
}

// New returns the service on pool; now is the clock "recover since" is
// checked against.
func New(pool *pgxpool.Pool, cfg Config, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, q: sqlcdb.New(pool), cfg: cfg, now: now}
}

// Policy is the URL policy endpoints are checked with.
func (s *Service) Policy() outbound.Policy { return s.cfg.Policy }

// NewEndpoint is what an operator registers.
type NewEndpoint struct {
	URL          string
	Description  string
	EventTypes   []string
	RateLimit    *int
	LegacySecret *string
}

// Change is an operator's change of an endpoint: each field set is
// changed; RateLimit and LegacySecret set to nil clear them.
type Change struct {
	URL          *string
	Description  *string
	EventTypes   *[]string
	RateLimit    Optional[int]
	LegacySecret Optional[string]
}

// change is an endpoint's changeable fields.
type change struct {
	URL, Description string
	EventTypes       []string
	RateLimit        *int
	LegacySecret     *string
}

// Optional is a field of a change: Set when it was given, Value nil when
// it was given as null.
type Optional[T any] struct {
	Set   bool
	Value *T
}

// List returns every undeleted endpoint, oldest first.
func (s *Service) List(ctx context.Context) (_ []Endpoint, err error) {
	defer fault.Mark(&err, what)
	rows, err := s.q.ListEndpoints(ctx, maxEndpointsListed)
	if err != nil {
		return nil, fmt.Errorf("list outbound endpoints: %w", err)
	}
	out := make([]Endpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, toEndpoint(sqlcdb.GetEndpointRow(r)))
	}
	return out, nil
}

// Get returns endpoint id, ErrNotFound when there is none (or it was
// deleted).
func (s *Service) Get(ctx context.Context, id uuid.UUID) (_ Endpoint, err error) {
	defer fault.Mark(&err, what)
	return get(ctx, s.q, id)
}

func get(ctx context.Context, q *sqlcdb.Queries, id uuid.UUID) (Endpoint, error) {
	r, err := q.GetEndpoint(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("read outbound endpoint %s: %w", id, err)
	}
	return toEndpoint(r), nil
}

// Create registers an endpoint on behalf of actor with a new secret.
func (s *Service) Create(ctx context.Context, actor string, n NewEndpoint) (_ Created, err error) {
	defer fault.Mark(&err, what)
	if n.EventTypes == nil {
		n.EventTypes = []string{}
	}
	if err := s.checkURL(n.URL); err != nil {
		return Created{}, err
	}
	if err := checkFields(n.Description, n.EventTypes, n.RateLimit, n.LegacySecret); err != nil {
		return Created{}, err
	}
	secret, err := outbound.NewSecret()
	if err != nil {
		return Created{}, err
	}
	var out Created
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		id, err := q.CreateEndpoint(ctx, sqlcdb.CreateEndpointParams{Url: n.URL, Description: n.Description,
			EventTypes: n.EventTypes, RateLimit: toInt32(n.RateLimit), Secret: secret, LegacySecret: n.LegacySecret, CreatedBy: actor})
		if err != nil {
			return fmt.Errorf("insert outbound endpoint: %w", err)
		}
		ep, err := get(ctx, q, id)
		if err != nil {
			return err
		}
		out = Created{Endpoint: ep, Secret: secret}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionCreate, TargetType: TargetEndpoint,
			TargetID: id.String(), At: ep.CreatedAt, Detail: map[string]any{"url": outbound.Redact(n.URL),
				"event_types": n.EventTypes, "rate_limit": n.RateLimit, "legacy_secret": n.LegacySecret != nil}})
	})
	if err != nil {
		return Created{}, err
	}
	return out, nil
}

// Update changes endpoint id as c says, on behalf of actor.
func (s *Service) Update(ctx context.Context, id uuid.UUID, actor string, c Change) (_ Endpoint, err error) {
	defer fault.Mark(&err, what)
	if c.URL != nil {
		if err := s.checkURL(*c.URL); err != nil {
			return Endpoint{}, err
		}
	}
	var out Endpoint
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := lock(ctx, q, id)
		if err != nil {
			return err
		}
		p := change{URL: cur.Url, Description: cur.Description, EventTypes: cur.EventTypes,
			RateLimit: fromInt32(cur.RateLimit), LegacySecret: cur.LegacySecret}
		var changed []string
		if c.URL != nil {
			p.URL, changed = *c.URL, append(changed, "url")
		}
		if c.Description != nil {
			p.Description, changed = *c.Description, append(changed, "description")
		}
		if c.EventTypes != nil {
			p.EventTypes, changed = *c.EventTypes, append(changed, "event_types")
			if p.EventTypes == nil {
				p.EventTypes = []string{}
			}
		}
		if c.RateLimit.Set {
			p.RateLimit, changed = c.RateLimit.Value, append(changed, "rate_limit")
		}
		if c.LegacySecret.Set {
			p.LegacySecret, changed = c.LegacySecret.Value, append(changed, "legacy_secret")
		}
		if len(changed) == 0 {
			return &input.Invalid{Param: "body", Reason: "names no field to change (url, description, event_types, rate_limit, legacy_secret)"}
		}
		if err := checkFields(p.Description, p.EventTypes, p.RateLimit, p.LegacySecret); err != nil {
			return err
		}
		if err := q.UpdateEndpoint(ctx, sqlcdb.UpdateEndpointParams{ID: id, Url: p.URL, Description: p.Description,
			EventTypes: p.EventTypes, RateLimit: toInt32(p.RateLimit), LegacySecret: p.LegacySecret}); err != nil {
			return fmt.Errorf("update outbound endpoint %s: %w", id, err)
		}
		if out, err = get(ctx, q, id); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionUpdate, TargetType: TargetEndpoint,
			TargetID: id.String(), At: out.UpdatedAt, Detail: map[string]any{"changed": changed, "url": outbound.Redact(p.URL),
				"event_types": p.EventTypes, "rate_limit": p.RateLimit, "legacy_secret": p.LegacySecret != nil}})
	})
	if err != nil {
		return Endpoint{}, err
	}
	return out, nil
}

// Delete deletes endpoint id (softly: its log stays, nothing is claimed
// for it), on behalf of actor.
func (s *Service) Delete(ctx context.Context, id uuid.UUID, actor, reason string) (err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return err
	}
	return s.change(ctx, id, actor, ActionDelete, reason, func(q *sqlcdb.Queries) (time.Time, error) {
		return q.DeleteEndpoint(ctx, sqlcdb.DeleteEndpointParams{ID: id, Actor: actor})
	}, nil)
}

// Disable disables endpoint id (its deliveries wait), on behalf of actor,
// for reason (required).
func (s *Service) Disable(ctx context.Context, id uuid.UUID, actor, reason string) (_ Endpoint, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, "say why the endpoint is disabled"); err != nil {
		return Endpoint{}, err
	}
	var out Endpoint
	err = s.change(ctx, id, actor, ActionDisable, reason, func(q *sqlcdb.Queries) (time.Time, error) {
		return q.DisableEndpoint(ctx, sqlcdb.DisableEndpointParams{ID: id, Actor: actor, Reason: reason})
	}, &out)
	return out, err
}

// Enable enables endpoint id (its waiting deliveries resume; a failing
// streak counts from now), on behalf of actor.
func (s *Service) Enable(ctx context.Context, id uuid.UUID, actor, reason string) (_ Endpoint, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return Endpoint{}, err
	}
	var out Endpoint
	err = s.change(ctx, id, actor, ActionEnable, reason, func(q *sqlcdb.Queries) (time.Time, error) {
		return q.EnableEndpoint(ctx, id)
	}, &out)
	return out, err
}

// change locks endpoint id, applies do (which returns when, by the
// database's clock) and audits action, in one transaction; out, when not
// nil, is the endpoint after it.
func (s *Service) change(ctx context.Context, id uuid.UUID, actor, action, reason string, do func(*sqlcdb.Queries) (time.Time, error), out *Endpoint) error {
	return database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := lock(ctx, q, id)
		if err != nil {
			return err
		}
		at, err := do(q)
		if err != nil {
			return fmt.Errorf("%s %s: %w", action, id, err)
		}
		if out != nil {
			if *out, err = get(ctx, q, id); err != nil {
				return err
			}
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: TargetEndpoint, TargetID: id.String(),
			Reason: reason, At: at, Detail: map[string]any{"url": outbound.Redact(cur.Url), "was_enabled": cur.Enabled}})
	})
}

// Secret returns endpoint id's secret; reading it is audited (actor).
func (s *Service) Secret(ctx context.Context, id uuid.UUID, actor string) (_ Secret, err error) {
	defer fault.Mark(&err, what)
	var out Secret
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := s.q.WithTx(tx).EndpointSecret(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read outbound endpoint %s's secret: %w", id, err)
		}
		out = Secret{Secret: r.Secret, PreviousSecretExpiresAt: r.PreviousSecretExpiresAt}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionReadSecret, TargetType: TargetEndpoint,
			TargetID: id.String(), At: s.now()})
	})
	if err != nil {
		return Secret{}, err
	}
	return out, nil
}

// RotateSecret makes secret (a new one when "") endpoint id's secret, on
// behalf of actor; the current one keeps signing for the overlap.
func (s *Service) RotateSecret(ctx context.Context, id uuid.UUID, actor, secret, reason string) (_ Secret, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return Secret{}, err
	}
	if secret == "" {
		if secret, err = outbound.NewSecret(); err != nil {
			return Secret{}, err
		}
	} else if _, err := outbound.ParseSecret(secret); err != nil {
		return Secret{}, &input.Invalid{Param: "secret", Reason: err.Error()}
	}
	var out Secret
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := lock(ctx, q, id)
		if err != nil {
			return err
		}
		if secret == cur.Secret {
			return &input.Invalid{Param: "secret", Reason: "is the current secret; a rotation needs a new one"}
		}
		expires, err := q.RotateSecret(ctx, sqlcdb.RotateSecretParams{ID: id, Secret: secret,
			OverlapSeconds: s.cfg.RotationOverlap.Seconds()})
		if err != nil {
			return fmt.Errorf("rotate outbound endpoint %s's secret: %w", id, err)
		}
		out = Secret{Secret: secret, PreviousSecretExpiresAt: expires}
		at := s.now()
		if expires != nil {
			at = expires.Add(-s.cfg.RotationOverlap)
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionRotate, TargetType: TargetEndpoint,
			TargetID: id.String(), Reason: reason, At: at, Detail: map[string]any{"url": outbound.Redact(cur.Url),
				"previous_secret_expires_at": expires, "dropped_older": cur.PreviousSecret != nil}})
	})
	if err != nil {
		return Secret{}, err
	}
	return out, nil
}

// Recover schedules again every message since since that endpoint id
// wants and did not receive, spaced at the recover rate; it returns how
// many deliveries it scheduled.
func (s *Service) Recover(ctx context.Context, id uuid.UUID, actor string, since time.Time, reason string) (_ int64, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return 0, err
	}
	if since.IsZero() {
		return 0, &input.Invalid{Param: "since", Reason: "is required: an RFC 3339 time such as 2026-11-20T10:00:00Z"}
	}
	if since.After(s.now()) {
		return 0, &input.Invalid{Param: "since", Reason: "must not be in the future"}
	}
	var n int64
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		cur, err := lock(ctx, q, id)
		if err != nil {
			return err
		}
		if n, err = q.Recover(ctx, sqlcdb.RecoverParams{EndpointID: id, Since: since, PerSecond: s.cfg.RecoverRate}); err != nil {
			return fmt.Errorf("recover outbound endpoint %s: %w", id, err)
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionRecover, TargetType: TargetEndpoint,
			TargetID: id.String(), Reason: reason, At: s.now(), Detail: map[string]any{"url": outbound.Redact(cur.Url),
				"since": since.UTC(), "scheduled": n, "per_second": s.cfg.RecoverRate}})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ResendDelivery makes delivery id (failed or pending) due now, its
// attempts counted afresh, on behalf of actor. ErrDelivered when it
// succeeded.
func (s *Service) ResendDelivery(ctx context.Context, id int64, actor, reason string) (_ Delivery, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return Delivery{}, err
	}
	var out Delivery
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		before, err := getDelivery(ctx, q, id)
		if err != nil {
			return err
		}
		resent, err := q.ResendDelivery(ctx, id)
		if err != nil {
			return fmt.Errorf("re-send outbound delivery %d: %w", id, err)
		}
		if !resent {
			return ErrDelivered
		}
		if out, err = getDelivery(ctx, q, id); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionResendDelivery, TargetType: TargetDelivery,
			TargetID: audit.ID(id), Reason: reason, At: s.now(), Detail: map[string]any{"endpoint_id": before.EndpointID,
				"message_id": before.MessageID, "was": before.State, "attempts": before.Attempts}})
	})
	if err != nil {
		return Delivery{}, err
	}
	return out, nil
}

// ResendMessage sends message id again to endpoint, whatever happened to
// its delivery before, on behalf of actor; it returns the delivery.
func (s *Service) ResendMessage(ctx context.Context, id int64, endpoint uuid.UUID, actor, reason string) (_ Delivery, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return Delivery{}, err
	}
	var out Delivery
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := lock(ctx, q, endpoint); err != nil {
			return err
		}
		if _, err := getMessage(ctx, q, id); err != nil {
			return err
		}
		did, err := q.ResendMessage(ctx, sqlcdb.ResendMessageParams{MessageID: id, EndpointID: endpoint})
		if err != nil {
			return fmt.Errorf("re-send outbound message %d to %s: %w", id, endpoint, err)
		}
		if out, err = getDelivery(ctx, q, did); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionResendMessage, TargetType: TargetMessage,
			TargetID: audit.ID(id), Reason: reason, At: s.now(), Detail: map[string]any{"endpoint_id": endpoint, "delivery_id": did}})
	})
	if err != nil {
		return Delivery{}, err
	}
	return out, nil
}

// Deliveries lists endpoint id's deliveries of state ("" for all), newest
// first, below beforeID (0: from the newest).
func (s *Service) Deliveries(ctx context.Context, id uuid.UUID, state string, beforeID int64, limit int) (_ Page[Delivery], err error) {
	defer fault.Mark(&err, what)
	switch state {
	case "", StatePending, StateSucceeded, StateFailed:
	default:
		return Page[Delivery]{}, &input.Invalid{Param: "state", Reason: "must be pending, succeeded or failed"}
	}
	if limit, err = input.Limit(limit, MaxLimit); err != nil {
		return Page[Delivery]{}, err
	}
	if _, err := get(ctx, s.q, id); err != nil {
		return Page[Delivery]{}, err
	}
	rows, err := s.q.EndpointDeliveries(ctx, sqlcdb.EndpointDeliveriesParams{EndpointID: id, State: state, BeforeID: beforeID, MaxRows: limit + 1})
	if err != nil {
		return Page[Delivery]{}, fmt.Errorf("list outbound endpoint %s's deliveries: %w", id, err)
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, toDelivery(r))
	}
	return page(out, limit, func(d Delivery) int64 { return d.ID }), nil
}

// Attempts lists endpoint id's delivery log, newest first, below beforeID.
func (s *Service) Attempts(ctx context.Context, id uuid.UUID, beforeID int64, limit int) (_ Page[Attempt], err error) {
	defer fault.Mark(&err, what)
	if limit, err = input.Limit(limit, MaxLimit); err != nil {
		return Page[Attempt]{}, err
	}
	if _, err := get(ctx, s.q, id); err != nil {
		return Page[Attempt]{}, err
	}
	rows, err := s.q.EndpointAttempts(ctx, sqlcdb.EndpointAttemptsParams{EndpointID: id, BeforeID: beforeID, MaxRows: limit + 1})
	if err != nil {
		return Page[Attempt]{}, fmt.Errorf("list outbound endpoint %s's attempts: %w", id, err)
	}
	out := make([]Attempt, 0, len(rows))
	for _, r := range rows {
		out = append(out, toAttempt(r))
	}
	return page(out, limit, func(a Attempt) int64 { return a.ID }), nil
}

// MessageFilter narrows Messages; "" is no filter.
type MessageFilter struct {
	UserID, EventType, EventID string
	BeforeID                   int64
	Limit                      int
}

// Messages lists messages, newest first.
func (s *Service) Messages(ctx context.Context, f MessageFilter) (_ Page[Message], err error) {
	defer fault.Mark(&err, what)
	limit, err := input.Limit(f.Limit, MaxLimit)
	if err != nil {
		return Page[Message]{}, err
	}
	for param, v := range map[string]string{"user_id": f.UserID, "event_type": f.EventType, "event_id": f.EventID} {
		if err := input.Text(param, v); err != nil {
			return Page[Message]{}, err
		}
	}
	rows, err := s.q.ListMessages(ctx, sqlcdb.ListMessagesParams{UserID: f.UserID, EventType: f.EventType, EventID: f.EventID,
		BeforeID: f.BeforeID, MaxRows: limit + 1})
	if err != nil {
		return Page[Message]{}, fmt.Errorf("list outbound messages: %w", err)
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, toMessage(sqlcdb.GetMessageRow(r)))
	}
	return page(out, limit, func(m Message) int64 { return m.ID }), nil
}

// Message returns message id with its deliveries and their attempts.
func (s *Service) Message(ctx context.Context, id int64) (_ MessageDetail, err error) {
	defer fault.Mark(&err, what)
	m, err := getMessage(ctx, s.q, id)
	if err != nil {
		return MessageDetail{}, err
	}
	ds, err := s.q.MessageDeliveries(ctx, id)
	if err != nil {
		return MessageDetail{}, fmt.Errorf("read outbound message %d's deliveries: %w", id, err)
	}
	as, err := s.q.MessageAttempts(ctx, id)
	if err != nil {
		return MessageDetail{}, fmt.Errorf("read outbound message %d's attempts: %w", id, err)
	}
	out := MessageDetail{Message: m, Deliveries: make([]DeliveryDetail, 0, len(ds))}
	for _, d := range ds {
		dd := DeliveryDetail{Delivery: toDelivery(d), AttemptLog: []Attempt{}}
		for _, a := range as {
			if a.DeliveryID == d.ID {
				dd.AttemptLog = append(dd.AttemptLog, toAttempt(a))
			}
		}
		out.Deliveries = append(out.Deliveries, dd)
	}
	return out, nil
}

// page cuts rows (limit+1 read) to limit and names the next page.
func page[T any](rows []T, limit int, id func(T) int64) Page[T] {
	if len(rows) <= limit {
		return Page[T]{Items: rows}
	}
	rows = rows[:limit]
	next := id(rows[limit-1])
	return Page[T]{Items: rows, NextBeforeID: &next}
}

func (s *Service) checkURL(raw string) error {
	if _, err := s.cfg.Policy.CheckURL(raw); err != nil {
		// CheckURL's reasons never quote the URL.
		return &input.Invalid{Param: "url", Reason: strings.TrimPrefix(err.Error(), outbound.ErrURL.Error()+": ")}
	}
	return nil
}

// checkFields refuses an endpoint's fields that CheckURL does not cover.
func checkFields(description string, types []string, rateLimit *int, legacy *string) error {
	if err := input.Text("description", description); err != nil {
		return err
	}
	if len(description) > MaxDescription {
		return &input.Invalid{Param: "description", Reason: fmt.Sprintf("must be at most %d bytes", MaxDescription)}
	}
	if err := outbound.CheckTypes(types); err != nil {
		return &input.Invalid{Param: "event_types", Reason: err.Error()}
	}
	if rateLimit != nil && (*rateLimit < 1 || *rateLimit > MaxRateLimit) {
		return &input.Invalid{Param: "rate_limit", Reason: fmt.Sprintf("must be 1 to %d deliveries per second, or null for none", MaxRateLimit)}
	}
	if legacy != nil {
		if err := input.Text("legacy_secret", *legacy); err != nil {
			return err
		}
		if len(*legacy) < MinLegacySecret || len(*legacy) > maxLegacySecret {
			return &input.Invalid{Param: "legacy_secret", Reason: fmt.Sprintf("must be %d to %d characters, or null for none", MinLegacySecret, maxLegacySecret)}
		}
	}
	return nil
}

func lock(ctx context.Context, q *sqlcdb.Queries, id uuid.UUID) (sqlcdb.LockEndpointRow, error) {
	r, err := q.LockEndpoint(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("lock outbound endpoint %s: %w", id, err)
	}
	return r, nil
}

func getDelivery(ctx context.Context, q *sqlcdb.Queries, id int64) (Delivery, error) {
	r, err := q.GetDelivery(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, ErrDeliveryNotFound
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("read outbound delivery %d: %w", id, err)
	}
	return toDelivery(r), nil
}

func getMessage(ctx context.Context, q *sqlcdb.Queries, id int64) (Message, error) {
	r, err := q.GetMessage(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Message{}, ErrMessageNotFound
	}
	if err != nil {
		return Message{}, fmt.Errorf("read outbound message %d: %w", id, err)
	}
	return toMessage(r), nil
}
