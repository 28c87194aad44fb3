package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The Postgres role each service connects as (000016_service_roles). The
// migrations create them NOLOGIN and grant each exactly what
// docs/design/architecture.md lists; EnableLogin makes one a login.
const (
	RoleWebhookAPI   = "aegis_webhook_api"
	RoleOutboxRelay  = "aegis_outbox_relay"
	RolePayoutWorker = "aegis_payout_worker"
	RoleDLQAdmin     = "aegis_dlq_admin"
)

// ServiceRoles maps each service's name to its role.
func ServiceRoles() map[string]string {
	return map[string]string{
		"webhook-api":   RoleWebhookAPI,
		"outbox-relay":  RoleOutboxRelay,
		"payout-worker": RolePayoutWorker,
		"dlq-admin":     RoleDLQAdmin,
	}
}

// EnableLogin lets role log in, with password unless it is empty (then the
// role's password is left as it is: trust auth on a developer's machine and
// in tests). conn must be a role with CREATEROLE, such as the migrator.
// Roles are cluster-wide and test databases migrate side by side: a role
// that can already log in without a new password is left alone, so that
// concurrent callers do not update one pg_authid row at once.
func EnableLogin(ctx context.Context, conn *pgx.Conn, role, password string) error {
	var canLogin bool
	err := conn.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = $1`, role).Scan(&canLogin)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("enable login for %s: no such role (apply the migrations first)", role)
	}
	if err != nil {
		return fmt.Errorf("enable login for %s: %w", role, err)
	}
	if canLogin && password == "" {
		return nil
	}
	// ALTER ROLE takes no parameters: format() quotes the name and the
	// password on the server.
	var stmt string
	if password == "" {
		err = conn.QueryRow(ctx, `SELECT format('ALTER ROLE %I LOGIN', $1::text)`, role).Scan(&stmt)
	} else {
		err = conn.QueryRow(ctx, `SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)`, role, password).Scan(&stmt)
	}
	if err != nil {
		return fmt.Errorf("enable login for %s: %w", role, err)
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		// XX000 "tuple concurrently updated": another caller enabled it at
		// the same moment.
		var pgErr *pgconn.PgError
		if password == "" && errors.As(err, &pgErr) && pgErr.Code == "XX000" {
			if rerr := conn.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = $1`, role).Scan(&canLogin); rerr == nil && canLogin {
				return nil
			}
		}
		return fmt.Errorf("enable login for %s: %w", role, err)
	}
	return nil
}
