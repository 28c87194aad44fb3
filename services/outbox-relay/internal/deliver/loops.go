package deliver

import (
	"context"
	"fmt"
	"time"

	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver/sqlcdb"
)

// every runs step now and then every interval until ctx is done.
func every(ctx context.Context, interval time.Duration, step func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunHealth disables, every HealthInterval, the endpoints that failed every
// attempt for DisableAfter, until ctx is done. Any number of replicas may
// run it: disable_outbound_endpoint succeeds for exactly one, and only that
// one alerts.
func (d *Deliverer) RunHealth(ctx context.Context) {
	every(ctx, d.cfg.HealthInterval, func(ctx context.Context) {
		if err := d.checkHealth(ctx); err != nil && ctx.Err() == nil {
			d.logger.Error("outbound health check", "error", err.Error())
		}
	})
}

func (d *Deliverer) checkHealth(ctx context.Context) error {
	failing, err := d.q.FailingEndpoints(ctx, d.cfg.DisableAfter.Seconds())
	if err != nil {
		return fmt.Errorf("failing endpoints: %w", err)
	}
	why := fmt.Sprintf("failed every attempt for %s", d.cfg.DisableAfter)
	for _, ep := range failing {
		disabled, err := d.q.DisableEndpoint(ctx, sqlcdb.DisableEndpointParams{ID: ep.ID, Reason: why})
		if err != nil {
			return fmt.Errorf("disable endpoint %s: %w", ep.ID, err)
		}
		if disabled {
			d.endpointDisabled(ctx, ep.ID.String(), ep.Url, reasonFailing, why)
		}
	}
	return nil
}

// retentionBatch bounds one delete statement.
const retentionBatch = 1000

// RunRetention deletes, every interval, the attempts older than
// LogRetention and the messages older than MessageRetention that have no
// pending delivery (their deliveries and attempts go with them).
func (d *Deliverer) RunRetention(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func(ctx context.Context) {
		if err := d.prune(ctx); err != nil && ctx.Err() == nil {
			d.logger.Error("outbound retention", "error", err.Error())
		}
	})
}

func (d *Deliverer) prune(ctx context.Context) error {
	for {
		n, err := d.q.DeleteOldAttempts(ctx, sqlcdb.DeleteOldAttemptsParams{AgeSeconds: d.cfg.LogRetention.Seconds(), Batch: retentionBatch})
		if err != nil {
			return fmt.Errorf("delete old attempts: %w", err)
		}
		if n < retentionBatch {
			break
		}
	}
	for {
		n, err := d.q.DeleteOldMessages(ctx, sqlcdb.DeleteOldMessagesParams{AgeSeconds: d.cfg.MessageRetention.Seconds(), Batch: retentionBatch})
		if err != nil {
			return fmt.Errorf("delete old messages: %w", err)
		}
		if n < retentionBatch {
			return nil
		}
	}
}

// RunStats sets the pending gauges every interval until ctx is done.
func (d *Deliverer) RunStats(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func(ctx context.Context) {
		if err := d.stats(ctx); err != nil && ctx.Err() == nil {
			d.logger.Error("outbound stats", "error", err.Error())
		}
	})
}

func (d *Deliverer) stats(ctx context.Context) error {
	rows, err := d.q.PendingStats(ctx)
	if err != nil {
		return fmt.Errorf("pending stats: %w", err)
	}
	d.m.pending.Reset()
	d.m.oldest.Reset()
	for _, r := range rows {
		d.m.pending.WithLabelValues(r.ID.String()).Set(float64(r.Pending))
		d.m.oldest.WithLabelValues(r.ID.String()).Set(r.OldestSeconds)
	}
	return nil
}
