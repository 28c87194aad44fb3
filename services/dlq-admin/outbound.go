package main

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
)

// outboundConfig is the management of outbound endpoints' settings.
type outboundConfig = endpoints.Config

// readOutbound reads OUTBOUND_ALLOW_HTTP and OUTBOUND_ALLOW_PRIVATE
// (outbound.ReadPolicy, shared with outbox-relay), OUTBOUND_ROTATION_OVERLAP
// and OUTBOUND_RECOVER_RATE (documented in readConfig's comment).
func readOutbound(env *config.Env) outboundConfig {
	c := outboundConfig{
		Policy:          outbound.ReadPolicy(env),
		RotationOverlap: env.Duration("OUTBOUND_ROTATION_OVERLAP", endpoints.DefaultRotationOverlap),
		RecoverRate:     env.Int("OUTBOUND_RECOVER_RATE", endpoints.DefaultRecoverRate),
	}
	env.Check(c.Validate(), map[string]string{
		"RotationOverlap": "OUTBOUND_ROTATION_OVERLAP",
		"RecoverRate":     "OUTBOUND_RECOVER_RATE",
	})
	return c
}

// newOutbound is the endpoints' management on pool (the API's /v1/outbound).
func newOutbound(pool *pgxpool.Pool, c outboundConfig) *endpoints.Service {
	return endpoints.New(pool, c, time.Now)
}
