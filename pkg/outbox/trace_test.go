package outbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// A row written inside a trace stores its W3C traceparent with the other
// headers (the relay publishes them to Kafka); a row written outside one
// stores none. The caller's header map is not changed.
func TestInsertStoresTheTraceContext(t *testing.T) {
	// As telemetry.Setup does when tracing is on.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	db := pgtest.New(t)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "POST /v1/payouts")
	defer span.End()

	traced, plain := msg("u1", 1), msg("u2", 1)
	var ids [2]int64
	require.NoError(t, database.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
		var err error
		if ids[0], err = outbox.Insert(ctx, tx, traced); err != nil {
			return err
		}
		ids[1], err = outbox.Insert(context.Background(), tx, plain)
		return err
	}))
	_, mutated := traced.Headers["traceparent"]
	require.False(t, mutated, "Insert must not write into the caller's map")

	headers := func(id int64) (string, string) {
		var tpHeader, eventType string
		require.NoError(t, db.Pool.QueryRow(context.Background(),
			`SELECT coalesce(headers->>'traceparent', ''), headers->>'event_type' FROM transaction_outbox WHERE id = $1`, id).
			Scan(&tpHeader, &eventType))
		return tpHeader, eventType
	}
	sc := span.SpanContext()
	got, eventType := headers(ids[0])
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()), got)
	require.Equal(t, "test.event", eventType, "the message's own headers are kept")
	got, _ = headers(ids[1])
	require.Empty(t, got, "no trace, no traceparent")
}
