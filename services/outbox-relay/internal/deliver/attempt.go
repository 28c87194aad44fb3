package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/hmacsig"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/pkg/telemetry"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver/sqlcdb"
)

// Headers besides Standard Webhooks'.
const (
	UserAgent = "Aegis-Webhooks/1"
	// HeaderLegacySignature and HeaderLegacyEventID are the legacy scheme's
	// (an endpoint with legacy_secret): t=<unix>,v1=<hex HMAC-SHA256 of
	// "t.body">.
	HeaderLegacySignature = "Aegis-Signature"
	HeaderLegacyEventID   = "Aegis-Event-Id"
)

// Outcomes of an attempt (outbound_attempts.outcome, the metric's label).
const (
	outcomeDelivered = "delivered"
	outcomeRetry     = "retry"
	outcomeFailed    = "failed"
)

// Reasons the relay disables an endpoint (the metric's label).
const (
	reasonGone    = "gone"
	reasonFailing = "failing"
	// whyGone is the disabled_reason stored for an endpoint that answered
	// 410 (queries.sql's DisabledEndpoints maps it back to reasonGone).
	whyGone = "answered 410 Gone"
)

// answer is what one POST got.
type answer struct {
	status     int // 0: no answer
	body       string
	err        error
	retryAfter time.Duration
	latency    time.Duration
}

// verdict is what an answer means for the delivery.
type verdict struct {
	outcome string
	state   string        // pending, succeeded, failed
	delay   time.Duration // until the next attempt (pending)
	gone    bool          // 410: disable the endpoint
	healthy bool
}

// decide applies the design's table to the answer of attempt n.
func (d *Deliverer) decide(a answer, n int) verdict {
	s := a.status
	switch {
	case a.err == nil && s >= 200 && s < 300:
		return verdict{outcome: outcomeDelivered, state: "succeeded", healthy: true}
	case a.err == nil && s == http.StatusGone:
		return verdict{outcome: outcomeFailed, state: "failed", gone: true}
	case a.err == nil && s >= 400 && s < 500 &&
		s != http.StatusRequestTimeout && s != http.StatusConflict && s != http.StatusTooManyRequests:
		return verdict{outcome: outcomeFailed, state: "failed"}
	}
	if n > len(d.cfg.Schedule) {
		return verdict{outcome: outcomeFailed, state: "failed"}
	}
	base := d.cfg.Schedule[n-1]
	delay := time.Duration(float64(base) * (0.9 + 0.2*rand.Float64())) // ±10 %
	// A Retry-After is honoured up to the schedule's longest step: a
	// receiver cannot park a delivery past what the schedule itself allows.
	return verdict{outcome: outcomeRetry, state: "pending", delay: max(delay, min(a.retryAfter, slices.Max(d.cfg.Schedule)))}
}

// attempt sends one claimed delivery and records what happened. When ctx
// ends before an answer the attempt is abandoned unrecorded: its lease
// makes it due again.
func (d *Deliverer) attempt(ctx context.Context, ep endpoint, c sqlcdb.ClaimRow) {
	parent := ctx
	if c.Traceparent != nil {
		parent = telemetry.Extract(ctx, map[string]string{telemetry.HeaderTraceparent: *c.Traceparent})
	}
	sctx, span := d.tracer.Start(parent, "outbound attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("aegis.outbound.endpoint", ep.id.String()),
			attribute.String("aegis.event_id", c.EventID), attribute.Int("aegis.outbound.attempt", c.Attempts)))
	defer span.End()

	at := d.now()
	a := d.send(sctx, ep, c, at)
	if a.status == 0 && ctx.Err() != nil {
		d.logger.Info("outbound attempt abandoned (stopping); due again after its lease",
			"endpoint", ep.id.String(), "delivery", c.ID)
		span.SetStatus(codes.Error, "abandoned")
		return
	}
	v := d.decide(a, c.Attempts)
	if a.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", a.status))
	}
	if v.outcome != outcomeDelivered {
		span.SetStatus(codes.Error, v.outcome)
	}
	// The answer is in: record it even when stopping.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(sctx), 10*time.Second)
	defer cancel()
	disabled, err := d.record(rctx, ep, c, at, a, v)
	if err != nil {
		d.logger.ErrorContext(sctx, "outbound attempt not recorded; due again after its lease",
			"endpoint", ep.id.String(), "delivery", c.ID, "error", err.Error())
		return
	}
	label := ep.id.String()
	d.m.attempts.WithLabelValues(label, v.outcome).Inc()
	d.m.attemptTime.WithLabelValues(label).Observe(a.latency.Seconds())
	if v.outcome == outcomeDelivered {
		d.m.lag.WithLabelValues(label).Observe(d.now().Sub(c.OccurredAt).Seconds())
	}
	attrs := []any{"endpoint", label, "url", outbound.Redact(ep.url), "delivery", c.ID, "event_id", c.EventID,
		"attempt", c.Attempts, "outcome", v.outcome, "status", a.status, "latency_ms", a.latency.Milliseconds()}
	if a.err != nil {
		attrs = append(attrs, "error", a.err.Error())
	}
	if v.state == "pending" {
		attrs = append(attrs, "next_in", v.delay.String())
	}
	d.logger.InfoContext(sctx, "outbound attempt", attrs...)
	if disabled {
		d.endpointDisabled(sctx, ep.id.String(), ep.url, reasonGone, whyGone)
	}
}

// send POSTs the message once.
func (d *Deliverer) send(ctx context.Context, ep endpoint, c sqlcdb.ClaimRow, at time.Time) answer {
	secrets := []string{ep.secret}
	if ep.previousSecret != "" {
		secrets = append(secrets, ep.previousSecret)
	}
	signer, err := outbound.NewSigner(secrets...)
	if err != nil {
		return answer{err: fmt.Errorf("endpoint secret unusable: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(c.Body))
	if err != nil {
		return answer{err: errors.New("build request: the endpoint url does not parse")}
	}
	for k, v := range signer.Headers(c.EventID, at, c.Body) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if ep.legacySecret != "" {
		req.Header.Set(HeaderLegacySignature, hmacsig.SignTimestamped([]byte(ep.legacySecret), at, c.Body))
		req.Header.Set(HeaderLegacyEventID, c.EventID)
	}
	start := time.Now()
	resp, err := d.http.Do(req)
	if err != nil {
		return answer{err: withoutURL(err, ep.url), latency: time.Since(start)}
	}
	defer func() { _ = resp.Body.Close() }()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, ResponseLimit))
	latency := time.Since(start)
	// Drain a little more so the connection can be reused; never a lot.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return answer{status: resp.StatusCode, body: storable(snippet), retryAfter: retryAfter(resp.Header.Get("Retry-After"), d.now()),
		latency: latency}
}

// record stores the attempt and the delivery's next state in one
// transaction, with the endpoint's health; true when this attempt's 410
// disabled the endpoint.
func (d *Deliverer) record(ctx context.Context, ep endpoint, c sqlcdb.ClaimRow, at time.Time, a answer, v verdict) (bool, error) {
	var status *int32
	if a.status != 0 {
		s := int32(a.status) //nolint:gosec // an HTTP status code
		status = &s
	}
	var errText, body *string
	if a.err != nil {
		e := a.err.Error()
		errText = &e
	}
	if a.status != 0 {
		body = &a.body
	}
	disabled := false
	err := database.InTx(ctx, d.pool, func(tx pgx.Tx) (err error) {
		q := d.q.WithTx(tx)
		if err := q.InsertAttempt(ctx, sqlcdb.InsertAttemptParams{DeliveryID: c.ID, MessageID: c.MessageID, EndpointID: ep.id,
			Attempt: c.Attempts, AttemptedAt: at, Outcome: v.outcome, StatusCode: status,
			LatencyMs: int(a.latency.Milliseconds()), ResponseBody: body, Error: errText}); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		if _, err := q.SettleDelivery(ctx, sqlcdb.SettleDeliveryParams{State: v.state, DelaySeconds: v.delay.Seconds(),
			AttemptedAt: &at, LastStatus: status, LastError: errText, ID: c.ID, Attempts: c.Attempts}); err != nil {
			return fmt.Errorf("settle delivery: %w", err)
		}
		if v.healthy {
			err = q.HealthSucceeded(ctx, ep.id)
		} else {
			err = q.HealthFailed(ctx, ep.id)
		}
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		if v.gone {
			if disabled, err = q.DisableEndpoint(ctx, sqlcdb.DisableEndpointParams{ID: ep.id, Reason: whyGone}); err != nil {
				return fmt.Errorf("disable endpoint: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("record attempt: %w", err)
	}
	return disabled, nil
}

// endpointDisabled counts and alerts one disabling (the caller's call of
// disable_outbound_endpoint returned true: exactly one per disabling).
func (d *Deliverer) endpointDisabled(ctx context.Context, id, rawURL, reason, why string) {
	d.m.disabled.WithLabelValues(reason).Inc()
	d.logger.WarnContext(ctx, "outbound endpoint disabled", "endpoint", id, "url", outbound.Redact(rawURL), "reason", why)
	if d.alerts == nil {
		return
	}
	d.alerts.Raise(ctx, alert.Alert{
		Key: alert.OutboundEndpointDisabledKey(id), Severity: alert.Error,
		Summary: "outbound endpoint disabled: " + why + "; its deliveries wait until it is enabled",
		Details: map[string]any{"endpoint": id, "url": outbound.Redact(rawURL), "reason": why},
	})
}

// withoutURL drops the request URL net/http puts in its errors (Post
// "https://host/path?token=…": …): an endpoint URL may carry a credential.
func withoutURL(err error, rawURL string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	msg := err.Error()
	if rawURL != "" && strings.Contains(msg, rawURL) {
		return errors.New(strings.ReplaceAll(msg, rawURL, outbound.Redact(rawURL)))
	}
	return err
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; zero
// when absent, unreadable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(7*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// storable is an answer's first bytes as text Postgres stores: valid
// UTF-8, no NUL.
func storable(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
}
