package endpoints

import (
	"encoding/json"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints/sqlcdb"
)

// Conversions from sqlc's rows to this package's shapes.

func toEndpoint(r sqlcdb.GetEndpointRow) Endpoint {
	e := Endpoint{ID: r.ID, URL: r.Url, Description: r.Description, EventTypes: r.EventTypes, RateLimit: fromInt32(r.RateLimit),
		Enabled: r.Enabled, EnabledAt: r.EnabledAt, DisabledAt: r.DisabledAt, DisabledBy: r.DisabledBy, DisabledReason: r.DisabledReason,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, HasLegacySecret: r.HasLegacySecret,
		PreviousSecretExpiresAt: r.PreviousSecretExpiresAt, FailingSince: r.FailingSince, LastSuccessAt: r.LastSuccessAt,
		Pending: r.Pending}
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	if r.Pending > 0 {
		at := r.OldestPendingAt
		e.OldestPendingAt = &at
	}
	return e
}

func toDelivery(r sqlcdb.OutboundDeliveriesForOp) Delivery {
	return Delivery{ID: r.ID, MessageID: r.MessageID, EndpointID: r.EndpointID, State: r.State, Attempts: r.Attempts,
		NextAttemptAt: r.NextAttemptAt, LastAttemptAt: r.LastAttemptAt, LastStatus: fromInt32(r.LastStatus), LastError: r.LastError,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt}
}

func toAttempt(r sqlcdb.OutboundAttemptsForOp) Attempt {
	return Attempt{ID: r.ID, DeliveryID: r.DeliveryID, MessageID: r.MessageID, EndpointID: r.EndpointID, Attempt: r.Attempt,
		AttemptedAt: r.AttemptedAt, Outcome: r.Outcome, StatusCode: fromInt32(r.StatusCode), LatencyMS: r.LatencyMs,
		ResponseBody: r.ResponseBody, Error: r.Error}
}

func toMessage(r sqlcdb.GetMessageRow) Message {
	body := json.RawMessage(r.Body)
	if !json.Valid(body) {
		// The relay stores the event as JSON; anything else is shown as a
		// JSON string rather than breaking the answer.
		b, _ := json.Marshal(string(r.Body)) // a string always encodes
		body = b
	}
	return Message{ID: r.ID, EventID: r.EventID, EventType: r.EventType, UserID: r.UserID, Sequence: r.Sequence,
		OccurredAt: r.OccurredAt, CreatedAt: r.CreatedAt, Body: body}
}

func fromInt32(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

func toInt32(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v) //nolint:gosec // checkFields bounds a rate limit to int32
	return &n
}
