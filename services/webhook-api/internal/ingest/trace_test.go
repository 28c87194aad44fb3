package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

type noWake struct{}

func (noWake) Notify()                     {}
func (noWake) QueueNotify(*pgx.Batch) bool { return false }

// With tracing on, a webhook committed alone is committed inside its
// request's trace (its statements are spans of it), and its outbox row
// stores the request's traceparent.
func TestCommitJoinsTheRequestsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	db := pgtest.New(t)
	ctx := context.Background()
	pool, err := database.Connect(ctx, db.URL, database.Options{MaxConns: 4})
	require.NoError(t, err)
	defer pool.Close()
	c, err := ingest.NewCommitter(ingest.NewStore(pool, noWake{}, time.Now), ingest.CommitterConfig{Workers: 1, MaxGroup: 8}, lifecycle.Deps{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()

	rctx, request := tp.Tracer("test").Start(ctx, "POST /webhooks/stripe")
	saved, err := c.Save(rctx, credit("evt_traced", "pi_traced", 0))
	request.End()
	require.NoError(t, err)
	require.Equal(t, ingest.Accepted, saved.Outcome)

	var traceparent string
	require.NoError(t, pool.QueryRow(ctx, `SELECT headers->>'traceparent' FROM transaction_outbox`).Scan(&traceparent))
	require.Equal(t, "00-"+request.SpanContext().TraceID().String()+"-"+request.SpanContext().SpanID().String()+"-01", traceparent)
	statements, commits := 0, 0
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != request.SpanContext().TraceID() {
			continue
		}
		switch {
		case s.Name() == "webhook commit":
			require.Equal(t, request.SpanContext().SpanID(), s.Parent().SpanID())
			commits++
		case s.SpanKind() == trace.SpanKindClient: // otelpgx
			statements++
		}
	}
	require.Equal(t, 1, commits, "one commit span, child of the request")
	require.Positive(t, statements, "the commit's statements are spans of the request's trace")
}
