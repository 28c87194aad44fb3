package relay

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/services/outbox-relay/internal/relay/sqlcdb"
)

// Listen holds a LISTEN connection on the outbox channel and calls wake for
// every notification until ctx is done. A lost connection is re-established
// with a growing pause; while it is down the relay's polling still finds the
// rows, only later.
func Listen(ctx context.Context, databaseURL string, logger *slog.Logger, wake func()) {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listenOnce(ctx, databaseURL, wake)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("outbox LISTEN connection lost; polling until it is back", "error", err.Error(), "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(pause*2, 10*time.Second)
	}
}

func listenOnce(ctx context.Context, databaseURL string, wake func()) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect for LISTEN: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := sqlcdb.New(conn).Listen(ctx); err != nil {
		return fmt.Errorf("LISTEN: %w", err)
	}
	wake() // rows may have committed while we were not listening
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		wake()
	}
}
