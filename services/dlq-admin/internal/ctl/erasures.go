package ctl

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Personal-data erasure (docs/operations/erasure.md): one operator asks,
// a second approves with `approvals approve`.

type erasureRow struct {
	ID          int64            `json:"id"`
	Pseudonym   string           `json:"pseudonym"`
	Status      string           `json:"status"`
	Reason      string           `json:"reason"`
	RequestedBy string           `json:"requested_by"`
	ApprovalID  *int64           `json:"approval_id"`
	ApprovedBy  *string          `json:"approved_by"`
	Rows        map[string]int64 `json:"rows"`
	RequestedAt time.Time        `json:"requested_at"`
	DecidedAt   *time.Time       `json:"decided_at"`
}

func (a *app) usersCmd() *cobra.Command {
	var reason string
	return group("users", "The platform's users: erase one's personal data (four-eyes)",
		a.command(leaf{
			use: "erase USER_ID",
			short: "Ask for the erasure of a user's personal data (operator); a second person approves it " +
				"(aegisctl approvals approve ID). Refused while their money is held or on its way",
			ops:  []string{"POST /v1/erasures"},
			args: cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&reason, "reason", "", "why, such as the request's ticket (required; kept in the audit log: no personal data)")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.requestErasure(ctx, args[0], reason)
			},
		}),
	)
}

func (a *app) erasuresCmd() *cobra.Command {
	var limit int
	return group("erasures", "Personal-data erasures: list, show",
		a.command(leaf{
			use:   "list",
			short: "Erasures, newest first (pseudonyms only)",
			ops:   []string{"GET /v1/erasures"},
			flags: func(fs *pflag.FlagSet) { fs.IntVar(&limit, "limit", 0, "how many (default the API's)") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				q := url.Values{}
				if limit > 0 {
					q.Set("limit", strconv.Itoa(limit))
				}
				return send(ctx, e, http.MethodGet, "/v1/erasures", q, nil, func(l struct {
					Items []erasureRow `json:"items"`
				}) error {
					t := newTable(e.out, "ID", "PSEUDONYM", "STATUS", "REQUESTED BY", "APPROVED BY", "REQUESTED")
					for _, r := range l.Items {
						t.row(strconv.FormatInt(r.ID, 10), r.Pseudonym, r.Status, r.RequestedBy, first(deref(r.ApprovedBy), "-"),
							r.RequestedAt.UTC().Format(time.RFC3339))
					}
					return t.flush()
				})
			},
		}),
		a.command(leaf{
			use:   "show ID",
			short: "One erasure: its pseudonym, who asked and approved, the rows it changed",
			ops:   []string{"GET /v1/erasures/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				id, err := oneID("erasures show", args)
				if err != nil {
					return err
				}
				return send(ctx, e, http.MethodGet, fmt.Sprintf("/v1/erasures/%d", id), nil, nil, func(r erasureRow) error {
					t := newTable(e.out)
					t.row("erasure", strconv.FormatInt(r.ID, 10))
					t.row("pseudonym", r.Pseudonym)
					t.row("status", r.Status)
					t.row("reason", r.Reason)
					t.row("requested by", r.RequestedBy)
					if r.ApprovalID != nil {
						t.row("approval", strconv.FormatInt(*r.ApprovalID, 10))
					}
					t.row("approved by", first(deref(r.ApprovedBy), "-"))
					t.row("decided", ts(r.DecidedAt))
					for _, k := range slices.Sorted(maps.Keys(r.Rows)) {
						t.row("rows "+k, strconv.FormatInt(r.Rows[k], 10))
					}
					return t.flush()
				})
			},
		}),
	)
}

func (e *env) requestErasure(ctx context.Context, userID, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return usageErrorf("users erase needs --reason: it is kept in the audit log")
	}
	var r struct {
		Erasure  erasureRow  `json:"erasure"`
		Approval approvalRow `json:"approval"`
	}
	if printed, err := e.post(ctx, "/v1/erasures", map[string]string{"user_id": userID, "reason": reason},
		"erasure answer", &r); printed || err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.out, "erasure %d of %s awaits a second operator: aegisctl approvals approve %d\n",
		r.Erasure.ID, r.Erasure.Pseudonym, r.Approval.ID)
	return err
}
