package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Outbound endpoints, their secrets, the delivery log and re-sends
// (docs/design/outbound.md, "Management API").

type endpointRow struct {
	ID                      string     `json:"id"`
	URL                     string     `json:"url"`
	Description             string     `json:"description"`
	EventTypes              []string   `json:"event_types"`
	RateLimit               *int       `json:"rate_limit"`
	Enabled                 bool       `json:"enabled"`
	DisabledAt              *time.Time `json:"disabled_at"`
	DisabledBy              *string    `json:"disabled_by"`
	DisabledReason          *string    `json:"disabled_reason"`
	CreatedBy               string     `json:"created_by"`
	CreatedAt               time.Time  `json:"created_at"`
	HasLegacySecret         bool       `json:"has_legacy_secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	FailingSince            *time.Time `json:"failing_since"`
	LastSuccessAt           *time.Time `json:"last_success_at"`
	Pending                 int64      `json:"pending"`
	OldestPendingAt         *time.Time `json:"oldest_pending_at"`
	Secret                  string     `json:"secret"`
}

type secretRow struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

type deliveryRow struct {
	ID            int64      `json:"id"`
	MessageID     int64      `json:"message_id"`
	EndpointID    string     `json:"endpoint_id"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt time.Time  `json:"next_attempt_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastStatus    *int       `json:"last_status"`
	LastError     *string    `json:"last_error"`
	AttemptLog    []attempt  `json:"attempt_log"`
}

type attempt struct {
	ID           int64     `json:"id"`
	DeliveryID   int64     `json:"delivery_id"`
	MessageID    int64     `json:"message_id"`
	Attempt      int       `json:"attempt"`
	AttemptedAt  time.Time `json:"attempted_at"`
	Outcome      string    `json:"outcome"`
	StatusCode   *int      `json:"status_code"`
	LatencyMS    int       `json:"latency_ms"`
	ResponseBody *string   `json:"response_body"`
	Error        *string   `json:"error"`
}

type messageRow struct {
	ID         int64           `json:"id"`
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	UserID     string          `json:"user_id"`
	Sequence   int64           `json:"sequence"`
	OccurredAt time.Time       `json:"occurred_at"`
	Body       json.RawMessage `json:"body"`
	Deliveries []deliveryRow   `json:"deliveries"`
}

// listPage is a list answer: items and the next page's before_id.
type listPage[T any] struct {
	Items        []T    `json:"items"`
	NextBeforeID *int64 `json:"next_before_id"`
}

func endpointPath(id string, rest ...string) string {
	return strings.Join(append([]string{"/v1/outbound/endpoints", url.PathEscape(id)}, rest...), "/")
}

// send sends a request and prints its answer: as it is with -o json|yaml,
// else decoded into out and rendered by table.
func send[T any](ctx context.Context, e *env, method, path string, query url.Values, body any, table func(T) error) error {
	raw, err := e.c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if e.structured() {
		return e.printRaw(raw)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return table(v)
}

func ts(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (r endpointRow) health() string {
	switch {
	case !r.Enabled:
		return "disabled"
	case r.FailingSince != nil:
		return "failing since " + ts(r.FailingSince)
	default:
		return "healthy"
	}
}

func types(t []string) string {
	if len(t) == 0 {
		return "all"
	}
	return strings.Join(t, ",")
}

func (e *env) endpointTable(rows ...endpointRow) error {
	t := newTable(e.out, "ENDPOINT", "URL", "TYPES", "RATE", "HEALTH", "PENDING", "OLDEST PENDING", "DESCRIPTION")
	for _, r := range rows {
		rate := "-"
		if r.RateLimit != nil {
			rate = strconv.Itoa(*r.RateLimit) + "/s"
		}
		t.row(r.ID, r.URL, types(r.EventTypes), rate, r.health(), strconv.FormatInt(r.Pending, 10), ts(r.OldestPendingAt),
			clip(oneLine(r.Description), 40))
	}
	return t.flush()
}

func (e *env) endpointDetail(r endpointRow) error {
	if err := e.endpointTable(r); err != nil {
		return err
	}
	if !r.Enabled {
		fmt.Fprintf(e.out, "disabled %s by %s: %s\n", ts(r.DisabledAt), deref(r.DisabledBy), deref(r.DisabledReason))
	}
	if r.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(e.out, "previous secret signs until %s\n", ts(r.PreviousSecretExpiresAt))
	}
	if r.HasLegacySecret {
		fmt.Fprintln(e.out, "legacy Aegis-Signature: on")
	}
	if r.Secret != "" {
		fmt.Fprintf(e.out, "secret: %s\n(shown once here; aegisctl endpoints secret %s shows it again)\n", r.Secret, r.ID)
	}
	return nil
}

func (e *env) secretOut(s secretRow) error {
	fmt.Fprintf(e.out, "secret: %s\n", s.Secret)
	if s.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(e.out, "previous secret signs until %s\n", ts(s.PreviousSecretExpiresAt))
	}
	return nil
}

func (e *env) deliveryTable(rows []deliveryRow) error {
	t := newTable(e.out, "DELIVERY", "MESSAGE", "ENDPOINT", "STATE", "ATTEMPTS", "NEXT", "LAST", "STATUS", "ERROR")
	for _, d := range rows {
		status := "-"
		if d.LastStatus != nil {
			status = strconv.Itoa(*d.LastStatus)
		}
		next := "-"
		if d.State == "pending" {
			next = d.NextAttemptAt.UTC().Format(time.RFC3339)
		}
		t.row(strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.MessageID, 10), d.EndpointID, d.State, strconv.Itoa(d.Attempts),
			next, ts(d.LastAttemptAt), status, clip(oneLine(deref(d.LastError)), 60))
	}
	return t.flush()
}

func (e *env) attemptTable(rows []attempt) error {
	t := newTable(e.out, "ATTEMPT", "DELIVERY", "MESSAGE", "#", "AT", "OUTCOME", "STATUS", "MS", "ANSWER / ERROR")
	for _, a := range rows {
		status := "-"
		if a.StatusCode != nil {
			status = strconv.Itoa(*a.StatusCode)
		}
		what := deref(a.Error)
		if what == "" {
			what = deref(a.ResponseBody)
		}
		t.row(strconv.FormatInt(a.ID, 10), strconv.FormatInt(a.DeliveryID, 10), strconv.FormatInt(a.MessageID, 10),
			strconv.Itoa(a.Attempt), a.AttemptedAt.UTC().Format(time.RFC3339), a.Outcome, status, strconv.Itoa(a.LatencyMS),
			clip(oneLine(what), 60))
	}
	return t.flush()
}

// more tells where the next page starts.
func (e *env) more(next *int64) {
	if next != nil {
		fmt.Fprintf(e.errOut, "more: --before-id %d\n", *next)
	}
}

// pageFlags are --limit and --before-id.
type pageFlags struct {
	limit    int
	beforeID int64
}

func (p *pageFlags) define(fs *pflag.FlagSet) {
	fs.IntVar(&p.limit, "limit", 50, "page size")
	fs.Int64Var(&p.beforeID, "before-id", 0, "the previous page's next_before_id")
}

func (p pageFlags) query() url.Values {
	q := url.Values{"limit": {strconv.Itoa(p.limit)}}
	if p.beforeID > 0 {
		q.Set("before_id", strconv.FormatInt(p.beforeID, 10))
	}
	return q
}

func (a *app) endpointsCmd() *cobra.Command {
	var since, recoverReason, state string
	var deliveries, attempts pageFlags
	reasonFlag := func(v *string, usage string) func(*pflag.FlagSet) {
		return func(fs *pflag.FlagSet) { fs.StringVar(v, "reason", "", usage) }
	}
	var deleteReason, disableReason, enableReason, rotateReason, secret string
	return group("endpoints", "Outbound endpoints: register, change, disable, rotate secrets, recover, read the delivery log",
		a.command(leaf{
			use:   "list",
			short: "Every endpoint with its health, pending deliveries and the oldest one",
			ops:   []string{"GET /v1/outbound/endpoints"},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return send(ctx, e, http.MethodGet, "/v1/outbound/endpoints", nil, nil, func(p listPage[endpointRow]) error {
					return e.endpointTable(p.Items...)
				})
			},
		}),
		a.command(leaf{
			use:   "get ENDPOINT_ID",
			short: "One endpoint",
			ops:   []string{"GET /v1/outbound/endpoints/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return send(ctx, e, http.MethodGet, endpointPath(args[0]), nil, nil, e.endpointDetail)
			},
		}),
		a.createEndpointCmd(),
		a.updateEndpointCmd(),
		a.command(leaf{
			use:   "delete ENDPOINT_ID",
			short: "Delete an endpoint softly (operator): no new deliveries; its log stays",
			ops:   []string{"DELETE /v1/outbound/endpoints/{id}"},
			args:  cobra.ExactArgs(1),
			flags: reasonFlag(&deleteReason, "kept in the audit log"),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.endpointAction(ctx, "delete", args[0], deleteReason, "")
			},
		}),
		a.command(leaf{
			use:   "disable ENDPOINT_ID",
			short: "Disable an endpoint (operator); its deliveries wait",
			ops:   []string{"POST /v1/outbound/endpoints/{id}/disable"},
			args:  cobra.ExactArgs(1),
			flags: reasonFlag(&disableReason, "why (required)"),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.endpointAction(ctx, "disable", args[0], disableReason, "")
			},
		}),
		a.command(leaf{
			use:   "enable ENDPOINT_ID",
			short: "Enable an endpoint (operator): its waiting deliveries resume",
			ops:   []string{"POST /v1/outbound/endpoints/{id}/enable"},
			args:  cobra.ExactArgs(1),
			flags: reasonFlag(&enableReason, "kept in the audit log"),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.endpointAction(ctx, "enable", args[0], enableReason, "")
			},
		}),
		a.command(leaf{
			use:   "secret ENDPOINT_ID",
			short: "The endpoint's signing secret (operator; the read is audited)",
			ops:   []string{"GET /v1/outbound/endpoints/{id}/secret"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.endpointAction(ctx, "secret", args[0], "", "")
			},
		}),
		a.command(leaf{
			use:   "rotate-secret ENDPOINT_ID",
			short: "Rotate the secret (operator); the old one signs too for OUTBOUND_ROTATION_OVERLAP",
			ops:   []string{"POST /v1/outbound/endpoints/{id}/rotate-secret"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&rotateReason, "reason", "", "kept in the audit log")
				fs.StringVar(&secret, "secret", "", "the new secret, whsec_… (default generated)")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.endpointAction(ctx, "rotate-secret", args[0], rotateReason, secret)
			},
		}),
		a.command(leaf{
			use:     "recover ENDPOINT_ID",
			short:   "Re-send, throttled, every message since --since the endpoint wants and did not receive (operator)",
			example: "  aegisctl endpoints recover 7c9e… --since 2026-11-28T00:00:00Z --reason outage",
			ops:     []string{"POST /v1/outbound/endpoints/{id}/recover"},
			args:    cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&since, "since", "", "RFC 3339, not in the future (required)")
				fs.StringVar(&recoverReason, "reason", "", "kept in the audit log")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				id := args[0]
				if since == "" {
					return usageErrorf("endpoints recover needs --since (RFC 3339, e.g. 2026-11-20T10:00:00Z)")
				}
				return send(ctx, e, http.MethodPost, endpointPath(id, "recover"), nil, map[string]string{"since": since, "reason": recoverReason},
					func(v struct {
						Scheduled int64 `json:"scheduled"`
					}) error {
						_, err := fmt.Fprintf(e.out, "scheduled %d deliveries to %s\n", v.Scheduled, id)
						return err
					})
			},
		}),
		a.command(leaf{
			use:   "deliveries ENDPOINT_ID",
			short: "The endpoint's deliveries, newest first",
			ops:   []string{"GET /v1/outbound/endpoints/{id}/deliveries"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				deliveries.define(fs)
				fs.StringVar(&state, "state", "", "pending, succeeded or failed")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				q := deliveries.query()
				if state != "" {
					q.Set("state", state)
				}
				return send(ctx, e, http.MethodGet, endpointPath(args[0], "deliveries"), q, nil, func(pg listPage[deliveryRow]) error {
					defer e.more(pg.NextBeforeID)
					return e.deliveryTable(pg.Items)
				})
			},
		}),
		a.command(leaf{
			use:   "attempts ENDPOINT_ID",
			short: "The endpoint's delivery log: every attempt, status, latency, answer",
			ops:   []string{"GET /v1/outbound/endpoints/{id}/attempts"},
			args:  cobra.ExactArgs(1),
			flags: attempts.define,
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return send(ctx, e, http.MethodGet, endpointPath(args[0], "attempts"), attempts.query(), nil, func(pg listPage[attempt]) error {
					defer e.more(pg.NextBeforeID)
					return e.attemptTable(pg.Items)
				})
			},
		}),
	)
}

// splitTypes reads --event-types a,b ("" is every type).
func splitTypes(v string) []string {
	out := []string{}
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (a *app) createEndpointCmd() *cobra.Command {
	var u, description, eventTypes, legacy string
	var rate int
	return a.command(leaf{
		use:     "create",
		short:   "Register an endpoint (operator); prints its new secret (once)",
		example: "  aegisctl endpoints create --url https://platform.example.com/aegis --event-types 'payout.*,refund.posted'",
		ops:     []string{"POST /v1/outbound/endpoints"},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&u, "url", "", "https address (required)")
			fs.StringVar(&description, "description", "", "for people")
			fs.StringVar(&eventTypes, "event-types", "", "comma-separated types or prefixes (payout.*); default every type")
			fs.IntVar(&rate, "rate-limit", 0, "deliveries per second (default none)")
			fs.StringVar(&legacy, "legacy-secret", "", "the old SETTLEMENT_WEBHOOK_SECRET: deliveries also carry Aegis-Signature")
		},
		run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
			if u == "" {
				return usageErrorf("endpoints create needs --url")
			}
			body := map[string]any{"url": u, "description": description, "event_types": splitTypes(eventTypes)}
			if rate != 0 {
				body["rate_limit"] = rate
			}
			if legacy != "" {
				body["legacy_secret"] = legacy
			}
			return send(ctx, e, http.MethodPost, "/v1/outbound/endpoints", nil, body, e.endpointDetail)
		},
	})
}

func (a *app) updateEndpointCmd() *cobra.Command {
	var u, description, eventTypes, rate, legacy, reason string
	return a.command(leaf{
		use:   "update ENDPOINT_ID",
		short: "Change an endpoint (operator): only the flags given; none turns rate limit or legacy secret off",
		ops:   []string{"PATCH /v1/outbound/endpoints/{id}"},
		args:  cobra.ExactArgs(1),
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&u, "url", "", "https address")
			fs.StringVar(&description, "description", "", "for people")
			fs.StringVar(&eventTypes, "event-types", "", `comma-separated types or prefixes; "" for every type`)
			fs.StringVar(&rate, "rate-limit", "", "deliveries per second, or none")
			fs.StringVar(&legacy, "legacy-secret", "", "the old secret, or none")
			fs.StringVar(&reason, "reason", "", "kept in the audit log")
		},
		run: func(ctx context.Context, e *env, cmd *cobra.Command, args []string) error {
			// What was given, even as "": a flag absent leaves its field alone.
			set := cmd.Flags().Changed
			body := map[string]any{}
			if set("url") {
				body["url"] = u
			}
			if set("description") {
				body["description"] = description
			}
			if set("event-types") {
				body["event_types"] = splitTypes(eventTypes)
			}
			if set("rate-limit") {
				if rate == "none" {
					body["rate_limit"] = nil
				} else {
					n, err := strconv.Atoi(rate)
					if err != nil {
						return usageErrorf("--rate-limit must be a number of deliveries per second or none, got %q", rate)
					}
					body["rate_limit"] = n
				}
			}
			if set("legacy-secret") {
				if legacy == "none" {
					body["legacy_secret"] = nil
				} else {
					body["legacy_secret"] = legacy
				}
			}
			if len(body) == 0 {
				return usageErrorf("endpoints update needs one of --url, --description, --event-types, --rate-limit (N or none), --legacy-secret (S or none)")
			}
			if reason != "" {
				body["reason"] = reason
			}
			return send(ctx, e, http.MethodPatch, endpointPath(args[0]), nil, body, e.endpointDetail)
		},
	})
}

// endpointAction is delete, disable, enable, secret and rotate-secret.
func (e *env) endpointAction(ctx context.Context, sub, id, reason, secret string) error {
	if id == "" {
		return usageErrorf("endpoints %s needs one endpoint ID", sub)
	}
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	switch sub {
	case "secret":
		return send(ctx, e, http.MethodGet, endpointPath(id, "secret"), nil, nil, e.secretOut)
	case "rotate-secret":
		if secret != "" {
			body["secret"] = secret
		}
		return send(ctx, e, http.MethodPost, endpointPath(id, "rotate-secret"), nil, body, e.secretOut)
	case "delete":
		return send(ctx, e, http.MethodDelete, endpointPath(id), nil, body, func(struct{}) error {
			_, err := fmt.Fprintf(e.out, "deleted %s\n", id)
			return err
		})
	case "disable":
		if reason == "" {
			return usageErrorf("endpoints disable needs --reason")
		}
	}
	return send(ctx, e, http.MethodPost, endpointPath(id, sub), nil, body, e.endpointDetail)
}

func (a *app) messagesCmd() *cobra.Command {
	var p pageFlags
	var user, eventType, eventID, endpoint, reason string
	return group("messages", "Outbound messages (events as delivered): list, get, re-send to an endpoint",
		a.command(leaf{
			use:   "list",
			short: "Messages, newest first",
			ops:   []string{"GET /v1/outbound/messages"},
			flags: func(fs *pflag.FlagSet) {
				p.define(fs)
				fs.StringVar(&user, "user-id", "", "the user the event is about")
				fs.StringVar(&eventType, "event-type", "", "payout.succeeded, refund.posted, …")
				fs.StringVar(&eventID, "event-id", "", "the event id")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				q := p.query()
				for k, v := range map[string]string{"user_id": user, "event_type": eventType, "event_id": eventID} {
					if v != "" {
						q.Set(k, v)
					}
				}
				return send(ctx, e, http.MethodGet, "/v1/outbound/messages", q, nil, func(pg listPage[messageRow]) error {
					defer e.more(pg.NextBeforeID)
					t := newTable(e.out, "MESSAGE", "EVENT", "TYPE", "USER", "SEQUENCE", "OCCURRED")
					for _, m := range pg.Items {
						t.row(strconv.FormatInt(m.ID, 10), m.EventID, m.EventType, m.UserID, strconv.FormatInt(m.Sequence, 10),
							m.OccurredAt.UTC().Format(time.RFC3339))
					}
					return t.flush()
				})
			},
		}),
		a.command(leaf{
			use:   "get MESSAGE_ID",
			short: "One message: its body, each delivery and every attempt",
			ops:   []string{"GET /v1/outbound/messages/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.getMessage(ctx, args)
			},
		}),
		a.command(leaf{
			use:   "resend MESSAGE_ID",
			short: "Send a message again to one endpoint (operator), whatever happened before",
			ops:   []string{"POST /v1/outbound/messages/{id}/resend"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&endpoint, "endpoint", "", "the endpoint (required)")
				fs.StringVar(&reason, "reason", "", "kept in the audit log")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				id, err := oneID("messages resend", args)
				if err != nil {
					return err
				}
				if endpoint == "" {
					return usageErrorf("messages resend needs --endpoint ENDPOINT_ID")
				}
				return send(ctx, e, http.MethodPost, "/v1/outbound/messages/"+strconv.FormatInt(id, 10)+"/resend", nil,
					map[string]string{"endpoint_id": endpoint, "reason": reason}, func(d deliveryRow) error {
						return e.deliveryTable([]deliveryRow{d})
					})
			},
		}),
	)
}

func (e *env) getMessage(ctx context.Context, pos []string) error {
	id, err := oneID("messages get", pos)
	if err != nil {
		return err
	}
	return send(ctx, e, http.MethodGet, "/v1/outbound/messages/"+strconv.FormatInt(id, 10), nil, nil, func(m messageRow) error {
		fmt.Fprintf(e.out, "message %d  event %s  %s  user %s  sequence %d  occurred %s\nbody:\n", m.ID, m.EventID, m.EventType,
			m.UserID, m.Sequence, m.OccurredAt.UTC().Format(time.RFC3339))
		if err := e.indent(m.Body); err != nil {
			return err
		}
		for _, d := range m.Deliveries {
			fmt.Fprintln(e.out)
			if err := e.deliveryTable([]deliveryRow{d}); err != nil {
				return err
			}
			if len(d.AttemptLog) > 0 {
				if err := e.attemptTable(d.AttemptLog); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (a *app) deliveriesCmd() *cobra.Command {
	var reason string
	return group("deliveries", "Outbound deliveries: re-send one",
		a.command(leaf{
			use:   "resend DELIVERY_ID",
			short: "Re-send a failed or pending delivery, due now (operator); a succeeded one is exit 5",
			ops:   []string{"POST /v1/outbound/deliveries/{id}/resend"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.StringVar(&reason, "reason", "", "kept in the audit log") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				id, err := oneID("deliveries resend", args)
				if err != nil {
					return err
				}
				return send(ctx, e, http.MethodPost, "/v1/outbound/deliveries/"+strconv.FormatInt(id, 10)+"/resend", nil,
					map[string]string{"reason": reason}, func(d deliveryRow) error { return e.deliveryTable([]deliveryRow{d}) })
			},
		}),
	)
}
