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
	exported := map[string]bool{}
	every(ctx, interval, func(ctx context.Context) {
		if err := d.stats(ctx, exported); err != nil && ctx.Err() == nil {
			d.logger.Error("outbound stats", "error", err.Error())
		}
	})
}

// stats sets the gauges of every undeleted endpoint and drops those of the
// endpoints gone since (exported: the ones set last time). A series is
// never briefly missing: an alert's `for` would start over.
func (d *Deliverer) stats(ctx context.Context, exported map[string]bool) error {
	rows, err := d.q.PendingStats(ctx)
	if err != nil {
		return fmt.Errorf("pending stats: %w", err)
	}
	now := make(map[string]bool, len(rows))
	for _, r := range rows {
		id := r.ID.String()
		now[id] = true
		d.m.pending.WithLabelValues(id).Set(float64(r.Pending))
		d.m.oldest.WithLabelValues(id).Set(r.OldestSeconds)
	}
	for id := range exported {
		if !now[id] {
			d.m.pending.DeleteLabelValues(id)
			d.m.oldest.DeleteLabelValues(id)
			delete(exported, id)
		}
	}
	for id := range now {
		exported[id] = true
	}
	disabled, err := d.q.DisabledEndpoints(ctx)
	if err != nil {
		return fmt.Errorf("disabled endpoints: %w", err)
	}
	byReason := map[string]int64{reasonGone: 0, reasonFailing: 0}
	for _, r := range disabled {
		byReason[r.Reason] = r.Disabled
	}
	for reason, n := range byReason {
		d.m.disabledNow.WithLabelValues(reason).Set(float64(n))
	}
	return nil
}
