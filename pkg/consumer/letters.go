package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/dlq/sqlcdb"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// LetterOf is the dead letter of record r, read by group, that failed with
// f; nil means Letter.
type LetterOf func(r *kgo.Record, group string, f dlq.Failure) dlq.Letter

// Letter is the default LetterOf: the record as consumed (dlq.Consumed)
// with the failure filled in now.
func Letter(r *kgo.Record, group string, f dlq.Failure) dlq.Letter {
	return dlq.ConsumedRecord(r, group).Letter().WithFailure(f, time.Now())
}

func (lo LetterOf) of(r *kgo.Record, group string, f dlq.Failure) dlq.Letter {
	if lo == nil {
		return Letter(r, group, f)
	}
	return lo(r, group, f)
}

// Publish dead-letters records to <topic>.dlq with Client and waits for
// Kafka's ack, from where dlq-admin stores them: the path of a consumer
// whose own database may be what failed. Writer counts and logs each
// letter published (nil counts none).
type Publish struct {
	Client *kgo.Client
	Group  string
	Writer *dlq.Writer
	Letter LetterOf
}

// DeadLetter publishes r's letter with f once.
func (p Publish) DeadLetter(ctx context.Context, r *kgo.Record, f dlq.Failure) error {
	l := p.Letter.of(r, p.Group, f)
	rec, err := l.Record()
	if err != nil {
		return errclass.AsPermanent(fmt.Errorf("build dead letter of %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err))
	}
	if err := p.Client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("publish dead letter to %s: %w", rec.Topic, err)
	}
	p.Writer.Written(ctx, l)
	return nil
}

// Store dead-letters records straight into dead_letters with DB: the path
// of a consumer that owns the dead-letter store. Writer counts and logs each
// letter stored (nil counts none); OnStored, if set, is called after a
// letter was newly stored (a redelivered one is stored once) and must not
// block.
type Store struct {
	DB       sqlcdb.DBTX
	Group    string
	Writer   *dlq.Writer
	Letter   LetterOf
	OnStored func()
}

// DeadLetter stores r's letter with f once.
func (s Store) DeadLetter(ctx context.Context, r *kgo.Record, f dlq.Failure) error {
	l := s.Letter.of(r, s.Group, f)
	_, inserted, err := s.Writer.Insert(ctx, s.DB, l)
	if err != nil {
		return fmt.Errorf("store dead letter of %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if inserted {
		s.Writer.Written(ctx, l)
		if s.OnStored != nil {
			s.OnStored()
		}
	}
	return nil
}
