package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
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

// oneEndpoint parses the single positional endpoint id.
func oneEndpoint(name string, pos []string) (string, error) {
	if len(pos) != 1 || pos[0] == "" {
		return "", usageErrorf("%s needs one endpoint ID", name)
	}
	return pos[0], nil
}

// send sends a request and prints its answer: as it is with --output json,
// else decoded into out and rendered by table.
func send[T any](ctx context.Context, e *env, method, path string, query url.Values, body any, table func(T) error) error {
	raw, err := e.c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if e.json {
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

func (p *pageFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&p.limit, "limit", 50, "")
	fs.Int64Var(&p.beforeID, "before-id", 0, "")
}

func (p pageFlags) query() url.Values {
	q := url.Values{"limit": {strconv.Itoa(p.limit)}}
	if p.beforeID > 0 {
		q.Set("before_id", strconv.FormatInt(p.beforeID, 10))
	}
	return q
}

func (e *env) endpoints(ctx context.Context, sub string, args []string) error {
	name := "endpoints " + sub
	switch sub {
	case "list":
		pos, err := flags(name, args, nil)
		if err != nil {
			return err
		}
		if err := noArgs(name, pos); err != nil {
			return err
		}
		return send(ctx, e, http.MethodGet, "/v1/outbound/endpoints", nil, nil, func(p listPage[endpointRow]) error {
			return e.endpointTable(p.Items...)
		})
	case "get":
		pos, err := flags(name, args, nil)
		if err != nil {
			return err
		}
		id, err := oneEndpoint(name, pos)
		if err != nil {
			return err
		}
		return send(ctx, e, http.MethodGet, endpointPath(id), nil, nil, e.endpointDetail)
	case "create":
		return e.createEndpoint(ctx, args)
	case "update":
		return e.updateEndpoint(ctx, args)
	case "delete", "disable", "enable", "rotate-secret", "secret":
		return e.endpointAction(ctx, sub, args)
	case "recover":
		var since, reason string
		pos, err := flags(name, args, func(fs *flag.FlagSet) {
			fs.StringVar(&since, "since", "", "")
			fs.StringVar(&reason, "reason", "", "")
		})
		if err != nil {
			return err
		}
		id, err := oneEndpoint(name, pos)
		if err != nil {
			return err
		}
		if since == "" {
			return usageErrorf("endpoints recover needs --since (RFC 3339, e.g. 2026-11-20T10:00:00Z)")
		}
		return send(ctx, e, http.MethodPost, endpointPath(id, "recover"), nil, map[string]string{"since": since, "reason": reason},
			func(v struct {
				Scheduled int64 `json:"scheduled"`
			}) error {
				_, err := fmt.Fprintf(e.out, "scheduled %d deliveries to %s\n", v.Scheduled, id)
				return err
			})
	case "deliveries":
		var p pageFlags
		var state string
		pos, err := flags(name, args, func(fs *flag.FlagSet) {
			p.define(fs)
			fs.StringVar(&state, "state", "", "")
		})
		if err != nil {
			return err
		}
		id, err := oneEndpoint(name, pos)
		if err != nil {
			return err
		}
		q := p.query()
		if state != "" {
			q.Set("state", state)
		}
		return send(ctx, e, http.MethodGet, endpointPath(id, "deliveries"), q, nil, func(pg listPage[deliveryRow]) error {
			defer e.more(pg.NextBeforeID)
			return e.deliveryTable(pg.Items)
		})
	case "attempts":
		var p pageFlags
		pos, err := flags(name, args, p.define)
		if err != nil {
			return err
		}
		id, err := oneEndpoint(name, pos)
		if err != nil {
			return err
		}
		return send(ctx, e, http.MethodGet, endpointPath(id, "attempts"), p.query(), nil, func(pg listPage[attempt]) error {
			defer e.more(pg.NextBeforeID)
			return e.attemptTable(pg.Items)
		})
	}
	return usageErrorf("unknown command %q", strings.TrimSpace(name))
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

func (e *env) createEndpoint(ctx context.Context, args []string) error {
	var u, description, eventTypes, legacy string
	var rate int
	pos, err := flags("endpoints create", args, func(fs *flag.FlagSet) {
		fs.StringVar(&u, "url", "", "")
		fs.StringVar(&description, "description", "", "")
		fs.StringVar(&eventTypes, "event-types", "", "")
		fs.IntVar(&rate, "rate-limit", 0, "")
		fs.StringVar(&legacy, "legacy-secret", "", "")
	})
	if err != nil {
		return err
	}
	if err := noArgs("endpoints create", pos); err != nil {
		return err
	}
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
}

func (e *env) updateEndpoint(ctx context.Context, args []string) error {
	var u, description, eventTypes, rate, legacy, reason string
	var fset *flag.FlagSet
	pos, err := flags("endpoints update", args, func(fs *flag.FlagSet) {
		fset = fs
		fs.StringVar(&u, "url", "", "")
		fs.StringVar(&description, "description", "", "")
		fs.StringVar(&eventTypes, "event-types", "", "")
		fs.StringVar(&rate, "rate-limit", "", "")
		fs.StringVar(&legacy, "legacy-secret", "", "")
		fs.StringVar(&reason, "reason", "", "")
	})
	if err != nil {
		return err
	}
	id, err := oneEndpoint("endpoints update", pos)
	if err != nil {
		return err
	}
	// What was given, even as "": a flag absent leaves its field alone.
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	body := map[string]any{}
	if set["url"] {
		body["url"] = u
	}
	if set["description"] {
		body["description"] = description
	}
	if set["event-types"] {
		body["event_types"] = splitTypes(eventTypes)
	}
	if set["rate-limit"] {
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
	if set["legacy-secret"] {
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
	return send(ctx, e, http.MethodPatch, endpointPath(id), nil, body, e.endpointDetail)
}

// endpointAction is delete, disable, enable, secret and rotate-secret.
func (e *env) endpointAction(ctx context.Context, sub string, args []string) error {
	name := "endpoints " + sub
	var reason, secret string
	pos, err := flags(name, args, func(fs *flag.FlagSet) {
		if sub != "secret" {
			fs.StringVar(&reason, "reason", "", "")
		}
		if sub == "rotate-secret" {
			fs.StringVar(&secret, "secret", "", "")
		}
	})
	if err != nil {
		return err
	}
	id, err := oneEndpoint(name, pos)
	if err != nil {
		return err
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

func (e *env) messages(ctx context.Context, sub string, args []string) error {
	name := "messages " + sub
	switch sub {
	case "list":
		var p pageFlags
		var user, eventType, eventID string
		pos, err := flags(name, args, func(fs *flag.FlagSet) {
			p.define(fs)
			fs.StringVar(&user, "user-id", "", "")
			fs.StringVar(&eventType, "event-type", "", "")
			fs.StringVar(&eventID, "event-id", "", "")
		})
		if err != nil {
			return err
		}
		if err := noArgs(name, pos); err != nil {
			return err
		}
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
	case "get":
		pos, err := flags(name, args, nil)
		if err != nil {
			return err
		}
		id, err := oneID(name, pos)
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
	case "resend":
		var endpoint, reason string
		pos, err := flags(name, args, func(fs *flag.FlagSet) {
			fs.StringVar(&endpoint, "endpoint", "", "")
			fs.StringVar(&reason, "reason", "", "")
		})
		if err != nil {
			return err
		}
		id, err := oneID(name, pos)
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
	}
	return usageErrorf("unknown command %q", strings.TrimSpace(name))
}

func (e *env) resendDelivery(ctx context.Context, args []string) error {
	var reason string
	pos, err := flags("deliveries resend", args, func(fs *flag.FlagSet) { fs.StringVar(&reason, "reason", "", "") })
	if err != nil {
		return err
	}
	id, err := oneID("deliveries resend", pos)
	if err != nil {
		return err
	}
	return send(ctx, e, http.MethodPost, "/v1/outbound/deliveries/"+strconv.FormatInt(id, 10)+"/resend", nil,
		map[string]string{"reason": reason}, func(d deliveryRow) error { return e.deliveryTable([]deliveryRow{d}) })
}
