package database

import (
	"github.com/exaring/otelpgx"
)

// newTracer makes a span of each statement, batch, COPY, prepare and pool
// acquire with otelpgx. otelpgx records them only inside a recording span
// (a request, a consumed record, a replay): background loops (the relay's
// polls, the notifier, retention) open no root trace per statement. SQL text
// is recorded; query parameters never are (they carry payment data), nor
// connection details.
func newTracer() *otelpgx.Tracer {
	return otelpgx.NewTracer(
		otelpgx.WithDisableConnectionDetailsInAttributes(),
	)
}
