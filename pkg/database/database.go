package database

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/telemetry"
)

// Options tunes the pool. Zero values take pgx's defaults.
type Options struct {
	MaxConns        int32
	MinConns        int32
	ApplicationName string
	// Settings are session settings (GUCs) every connection of the pool
	// starts with. They travel in the startup message: no round trip, and
	// a connection never runs a statement without them. Not for a pool
	// behind PgBouncer, which refuses unknown startup parameters.
	Settings map[string]string
	// Registerer, when set, gets the pool's metrics (PoolCollector,
	// aegis_db_pool_*): each service passes its registry for its one pool.
	Registerer prometheus.Registerer
}

// Connect opens a pool to databaseURL and checks that it answers. It does not
// retry: callers run at startup and a process manager restarts them.
func Connect(ctx context.Context, databaseURL string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.MinConns > 0 {
		cfg.MinConns = opts.MinConns
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	for k, v := range opts.Settings {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.HealthCheckPeriod = 10 * time.Second
	// Statements are spans of the trace they run in; with tracing off no
	// tracer at all (otelpgx would still time every statement).
	if telemetry.On() {
		cfg.ConnConfig.Tracer = newTracer()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres at %s: %w", redact(cfg.ConnConfig), err)
	}
	if opts.Registerer != nil {
		if err := RegisterPool(opts.Registerer, pool); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// InTx runs fn in a transaction and commits it when fn returns nil. Any error
// or panic rolls back.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() {
		if err != nil {
			// The rollback error is secondary; the cause is already in err.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// Postgres error codes Aegis decides on, named once here from pgerrcode
// (https://www.postgresql.org/docs/current/errcodes-appendix.html): code
// outside this package uses these names or the Is* functions, never a
// literal SQLSTATE.
const (
	CodeUniqueViolation      = pgerrcode.UniqueViolation
	CodeCheckViolation       = pgerrcode.CheckViolation
	CodeSerializationFailure = pgerrcode.SerializationFailure
	CodeDeadlockDetected     = pgerrcode.DeadlockDetected
	CodeLockNotAvailable     = pgerrcode.LockNotAvailable
	CodeQueryCanceled        = pgerrcode.QueryCanceled
	CodeAdminShutdown        = pgerrcode.AdminShutdown
	CodeCrashShutdown        = pgerrcode.CrashShutdown
	CodeCannotConnectNow     = pgerrcode.CannotConnectNow
	CodeTooManyConnections   = pgerrcode.TooManyConnections
	CodeProgramLimitExceeded = pgerrcode.ProgramLimitExceeded
	CodeUntranslatable       = pgerrcode.UntranslatableCharacter
	CodeConnectionFailure    = pgerrcode.ConnectionFailure
	CodeNumericOutOfRange    = pgerrcode.NumericValueOutOfRange
	CodeDivisionByZero       = pgerrcode.DivisionByZero
)

// IsUniqueViolation reports whether err is a unique violation, on constraint
// when it is not empty.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeUniqueViolation {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// IsCheckViolation reports whether err is a check violation, on constraint
// when it is not empty (for example wallets_user_balance_non_negative).
func IsCheckViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeCheckViolation {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// IsTransient reports whether the operation that failed with err may succeed
// if retried: lost or refused connections, serialization failures,
// deadlocks, lock timeouts, statement timeouts, server shutdowns, a server
// out of connections or memory. Context cancellation is not transient: the
// caller gave up.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCode(pgErr.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// transientCode reports whether a server error code says "the same statement
// may succeed later": the classes of connection exceptions (08), transaction
// rollbacks (40: serialization failures, deadlocks), insufficient resources
// (53: disk full, out of memory, too many connections) and operator
// intervention (57: shutdowns, statement timeouts), plus lock timeouts.
func transientCode(code string) bool {
	return code == CodeLockNotAvailable ||
		pgerrcode.IsConnectionException(code) ||
		pgerrcode.IsTransactionRollback(code) ||
		pgerrcode.IsInsufficientResources(code) ||
		pgerrcode.IsOperatorIntervention(code)
}

// IsPermanent reports whether Postgres refused the statement for what it
// is, so the same statement with the same data fails every time: data
// exceptions (22: a value out of range, an unsupported \u0000), integrity
// violations (23) other than the duplicates a caller expects and checks
// first, program limits (54: an index row too large), syntax or access
// errors (42) and every other server error that is not transient. Errors
// that never reached a server answer (a lost connection, a timeout) are not
// permanent: the statement's fate is unknown.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return !transientCode(pgErr.Code)
}

// RefusesData reports whether Postgres refused a statement for the data it
// carried: a data exception (class 22: a \u0000 or an unpaired surrogate in
// jsonb, invalid UTF-8, a number out of range), an integrity violation that
// is not a duplicate (class 23 other than unique_violation: a check or NOT
// NULL constraint) or a program limit (class 54: an index row over the
// B-tree maximum). The same data fails the same way every time, so the
// caller must answer it, not retry it. Unlike IsPermanent it is false for
// errors that say the deployment is broken (an undefined table or column,
// class 42; an internal error, XX): those need an operator, and whoever sent
// the data should retry later.
//
// A row that no partition of its table takes (a table kept by time
// partition whose partitions do not reach the row's time) is not the data's
// fault either, though Postgres reports it as a check violation: NoPartition.
func RefusesData(err error) bool {
	code := Code(err)
	switch {
	case code == CodeUniqueViolation, NoPartition(err):
		return false
	case pgerrcode.IsDataException(code), pgerrcode.IsIntegrityConstraintViolation(code), pgerrcode.IsProgramLimitExceeded(code):
		return true
	}
	return false
}

// NoPartition reports whether err is Postgres finding no partition of a
// partitioned table for a row ("no partition of relation ... found for
// row"): a check violation (23514) that names no constraint, which every
// violated CHECK constraint does. The partitions are missing, the deployment
// is at fault (docs/design/data-lifecycle.md): the sender should retry
// later.
func NoPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation && pgErr.ConstraintName == ""
}

// Code returns the Postgres error code carried by err, or "".
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Ping is a readiness check for /readyz.
func Ping(pool *pgxpool.Pool) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	}
}
