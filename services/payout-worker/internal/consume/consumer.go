package consume

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
)

// Handler applies one message.
type Handler interface {
	Handle(ctx context.Context, m inbox.Message) error
}

// Config tunes the consumer.
type Config struct {
	Group string
	// MaxPollRecords bounds one poll; at most twice as many records are in
	// flight, and they must finish within the group's rebalance timeout.
	MaxPollRecords int
	// Concurrency is how many keys are handled at once.
	Concurrency int
	// InfraBackoff spaces in-place retries while Postgres or Redis is down.
	InfraBackoff backoff.Policy
	// Grace is how long in-flight records may run after shutdown begins.
	Grace time.Duration
	// StuckAfter is how many in-place retries of one record log that its
	// partition is blocked, by an outage or by a bug. The page comes from
	// dlq-admin's stall detector (the committed offset stops moving).
	StuckAfter int
	// RetryInPlaceAttempts and RetryInPlaceFor bound the in-place retries
	// of one record after transient failures (and the retries of its
	// dead-letter publish): whichever comes first ends them. A record whose
	// transient failure outlasts the bound is dead-lettered with class
	// transient and its history, so an outage or an unclassified bug delays
	// a batch by at most RetryInPlaceFor (plus one attempt) and never
	// blocks it for good. Zero means the defaults, 20 attempts and 1m.
	RetryInPlaceAttempts int
	RetryInPlaceFor      time.Duration
}

// Deps is what a Consumer works with besides its client, handler and
// Config: the logger, registry (its metrics are registered there) and panic
// counter (handler panics, aegis_panics_total; nil counts none) every
// component gets, the alerter (a dead letter Kafka will not take) and the
// dead-letter writer (counts and logs the letters it publishes; nil counts
// none).
type Deps struct {
	lifecycle.Deps
	Alerts  *alert.Alerter
	Letters *dlq.Writer
}

// Consumer runs the payout worker's handler over its consumer group.
type Consumer struct {
	loop *consumer.Consumer
}

// New returns a consumer on cl, a client created with ClientOpts.
func New(cl *kgo.Client, h Handler, cfg Config, deps Deps) (*Consumer, error) {
	group := cfg.Group
	loopCfg := consumer.Config{
		Name: "payout-worker/handler", Group: group, MaxPollRecords: cfg.MaxPollRecords,
		Concurrency: cfg.Concurrency, Order: consumer.PerKey, Backoff: cfg.InfraBackoff, Grace: cfg.Grace,
		StuckAfter: cfg.StuckAfter, RetryAttempts: cfg.RetryInPlaceAttempts, RetryFor: cfg.RetryInPlaceFor,
		Classify: consumer.Classify,
	}
	loopCfg = plant(loopCfg, deps.WithDefaults().Logger)
	handle := func(ctx context.Context, r *kgo.Record) error { return h.Handle(ctx, inbox.New(r, group)) }
	loop, err := consumer.New(cl, handle, loopCfg, consumer.Deps{Deps: deps.Deps, Alerts: deps.Alerts,
		DeadLetters: consumer.Publish{Client: cl, Group: group, Writer: deps.Letters}})
	if err != nil {
		return nil, fmt.Errorf("payout-worker consumer: %w", err)
	}
	return &Consumer{loop: loop}, nil
}

// ClientOpts are the franz-go options the consumer relies on, with the
// group membership settings of m.
func ClientOpts(group string, m kafkax.Membership, topics ...string) []kgo.Opt {
	return consumer.ClientOpts(group, m, topics...)
}

// Run consumes until ctx is done, then finishes the records in flight
// (within Grace), commits what was handled and returns.
func (c *Consumer) Run(ctx context.Context) error { return c.loop.Run(ctx) }
