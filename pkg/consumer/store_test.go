package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// Store puts a given-up record straight into dead_letters, as a consumer
// letter of its group with its attempts, and says so once.
func TestStoreWritesTheDeadLetterToPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	b := newHarness(t, map[string]func(int) error{
		"bad": func(int) error { return errclass.AsPermanent(errors.New("receiver answered 400")) },
	})
	var stored atomic.Int32
	// The letter as the settlement deliverer files it: its own error text.
	letter := func(r *kgo.Record, group string, f dlq.Failure) dlq.Letter {
		f.Err = fmt.Errorf("settlement webhook not delivered: %w", f.Err)
		return consumer.Letter(r, group, f)
	}
	b.start(t, consumer.Config{}, consumer.Store{DB: db.Pool, Group: group, Letter: letter, OnStored: func() { stored.Add(1) }}, false)
	b.produce(t, 0, "bad")
	b.produce(t, 0, "good")
	b.waitDone(t, "good")
	require.Eventually(t, func() bool { return stored.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	var (
		source, grp, key, class, msg string
		offset                       int64
		retries                      int
	)
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT source, consumer_group, partition_key, error_class, error, original_offset, retry_count FROM dead_letters`).
		Scan(&source, &grp, &key, &class, &msg, &offset, &retries))
	require.Equal(t, []any{"consumer", group, "bad", "permanent", "settlement webhook not delivered: receiver answered 400", int64(0), 1},
		[]any{source, grp, key, class, msg, offset, retries})
	require.Eventually(t, func() bool { return b.committed(t, 0) == 2 }, 10*time.Second, 20*time.Millisecond)
}
