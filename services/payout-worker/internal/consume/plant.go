//go:build !chaos

package consume

import (
	"log/slog"

	"github.com/aegis-payments/aegis/pkg/consumer"
)

// plant returns cfg as it is outside the chaos build: the planted
// poison-retry defect (plant_chaos.go) cannot be switched on in a
// production binary, and no variable is read for it.
func plant(cfg consumer.Config, _ *slog.Logger) consumer.Config { return cfg }
