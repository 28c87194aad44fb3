package consume

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/outbox"
)

// Failure is why a message is dead-lettered and what was tried.
type Failure struct {
	Err        error
	Class      errclass.Class
	RetryCount int
	History    []dlq.Attempt
}

// DeadLetter writes m's dead letter for <topic>.dlq to the outbox within tx,
// the transaction that also records the state the failure left behind, so
// the dead letter cannot be lost to a crash after that commit. The relay
// publishes it; dlq-admin stores it. An undecodable payload cannot go through
// the outbox: DeadLetter then returns a Poison error, and the consumer
// publishes the record directly.
func DeadLetter(ctx context.Context, tx pgx.Tx, m Message, f Failure, now time.Time) (dlq.Letter, error) {
	l := m.Letter()
	l.Error, l.ErrorClass, l.RetryCount, l.RetryHistory = f.Err.Error(), string(f.Class), f.RetryCount, f.History
	l.FirstFailureAt, l.FailedAt = now, now
	if len(l.RetryHistory) == 0 {
		l.RetryHistory = []dlq.Attempt{{At: now, Error: l.Error, Class: l.ErrorClass}}
	} else {
		l.FirstFailureAt = l.RetryHistory[0].At
	}
	msg, err := l.OutboxMessage()
	if err != nil {
		return l, errclass.AsPoison(err)
	}
	_, err = outbox.Insert(ctx, tx, msg)
	return l, err
}
