//go:build chaos

package consume

import (
	"context"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// envPlantPoisonRetry, set to 1 in a binary built with -tags chaos, plants
// a known defect for the chaos suite to catch: every Postgres refusal (a
// value out of range, a check violation) is retried in place as if
// transient, with no bound, so one poison record blocks its partition for
// ever. It is not configuration (no config reader, configuration reference or
// manifest has it) and exists in no other build (plant.go).
const envPlantPoisonRetry = "AEGIS_PLANT_POISON_RETRY"

// plant returns cfg with the defect planted when envPlantPoisonRetry is 1.
func plant(cfg consumer.Config, logger *slog.Logger) consumer.Config {
	if os.Getenv(envPlantPoisonRetry) != "1" {
		return cfg
	}
	logger.Warn("planted defect: Postgres refusals are retried in place for ever (chaos build)", "env", envPlantPoisonRetry)
	cfg.Classify = refusalsAsTransient
	cfg.RetryAttempts, cfg.RetryFor = math.MaxInt, time.Duration(math.MaxInt64)
	return cfg
}

// refusalsAsTransient is consumer.Classify with every Postgres refusal
// classed transient.
func refusalsAsTransient(ctx context.Context, err error) errclass.Class {
	c := consumer.Classify(ctx, err)
	if c == errclass.Permanent && database.IsPermanent(err) {
		return errclass.Transient
	}
	return c
}
