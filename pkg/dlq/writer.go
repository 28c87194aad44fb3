package dlq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/dlq/sqlcdb"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// MetricName is the one dead-letter counter every service exports:
// aegis_dead_letters_total{source,topic,class}, counted once, by the
// service that gave up on the message, where it wrote the letter (the
// scrape's service and pod labels say which service and replica).
// dlq-admin's aegis_dlq_ingested_total counts what it stored, not new
// letters.
const MetricName = "aegis_dead_letters_total"

// Failure is why a message is dead-lettered and what was tried.
type Failure struct {
	Err        error
	Class      errclass.Class
	RetryCount int
	History    []Attempt
}

// WithFailure returns l with f filled in at now: the error and class, the
// retry count and history (one attempt, now, when f has none) and the
// first and last failure times.
func (l Letter) WithFailure(f Failure, now time.Time) Letter {
	l.Error, l.ErrorClass, l.RetryCount, l.RetryHistory = f.Err.Error(), string(f.Class), f.RetryCount, f.History
	l.FirstFailureAt, l.FailedAt = now, now
	if len(l.RetryHistory) == 0 {
		l.RetryHistory = []Attempt{{At: now, Error: l.Error, Class: l.ErrorClass}}
	} else {
		l.FirstFailureAt = l.RetryHistory[0].At
	}
	return l
}

// Writer is the one way a service writes a dead letter it gave up on. Each
// of its methods writes the letter one way (stored in dead_letters,
// staged in the outbox, or noted after the consumer published it itself),
// counts it in aegis_dead_letters_total and logs it. It never alerts:
// dlq-admin alerts once for each letter it stores (see pkg/alert's keys) and
// exports the open letters the page is on, so one letter is one alert
// however many services saw it.
type Writer struct {
	service string
	logger  *slog.Logger
	count   *prometheus.CounterVec
}

// NewWriter returns the writer of service and registers the counter on
// deps.Registerer. Components of one service sharing a registry may each
// make one: they share the counter.
func NewWriter(service string, deps lifecycle.Deps) (*Writer, error) {
	deps = deps.WithDefaults()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "Dead letters written, by how the service gave up (source: consumer, relay, ingest), original topic and error class.",
	}, []string{"source", "topic", "class"})
	if err := deps.Registerer.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register %s: %w", MetricName, err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register %s: %w", MetricName, err)
		}
		vec = existing
	}
	return &Writer{service: service, logger: deps.Logger.With("component", "dlq"), count: vec}, nil
}

// Insert stores l in dead_letters with q: the relay's and ingest's
// letters, written in the transaction that gives up (see the package
// function Insert). Once that transaction has committed, and only if this
// call inserted the letter, the caller reports it with Written: a rolled
// back letter (a lost lease, a failed batch) is not counted.
func (w *Writer) Insert(ctx context.Context, q sqlcdb.DBTX, l Letter) (id int64, inserted bool, err error) {
	return Insert(ctx, q, l)
}

// Stage writes l for <topic>.dlq to the outbox within tx, the transaction
// that also records the state the failure left behind, so the letter
// cannot be lost to a crash after that commit; the relay publishes it and
// dlq-admin stores it. An undecodable payload cannot go through the
// outbox: Stage then returns a Poison error, and the consumer publishes
// the record directly.
func (w *Writer) Stage(ctx context.Context, tx pgx.Tx, l Letter) error {
	msg, err := l.OutboxMessage()
	if err != nil {
		return errclass.AsPoison(err)
	}
	if _, err := outbox.Insert(ctx, tx, msg); err != nil {
		return err
	}
	// Counted before the commit: a failed transaction is retried and may
	// count again; a letter is never left uncounted.
	w.Written(ctx, l)
	return nil
}

// Written counts and logs a letter once it is written: after the commit of
// an Insert, or the consumer's direct publish to <topic>.dlq once Kafka
// acknowledged it.
func (w *Writer) Written(ctx context.Context, l Letter) {
	if w == nil {
		return
	}
	w.count.WithLabelValues(l.Source, l.OriginalTopic, l.ErrorClass).Inc()
	attrs := []any{"service", w.service, "source", l.Source, "topic", l.OriginalTopic, "error_class", l.ErrorClass,
		"retry_count", l.RetryCount, "correlation_id", l.CorrelationID, "error", l.Error}
	if l.OutboxID != nil {
		attrs = append(attrs, "outbox_id", *l.OutboxID)
	}
	if l.OriginalOffset != nil && l.OriginalPartition != nil {
		attrs = append(attrs, "partition", *l.OriginalPartition, "offset", *l.OriginalOffset)
	}
	w.logger.ErrorContext(ctx, "dead letter written", attrs...)
}
