package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The PSP reconciliation: dlq-admin requests a run and reads it,
// webhook-api works it (docs/design/contract.md).

type pspDisagreement struct {
	Provider     string `json:"provider"`
	Kind         string `json:"kind"`
	PayoutID     string `json:"payout_id"`
	PSPObjectID  string `json:"psp_object_id"`
	PSPStatus    string `json:"psp_status"`
	LedgerStatus string `json:"ledger_status"`
	Detail       string `json:"detail"`
	State        string `json:"state"`
	FirstSeenRun int64  `json:"first_seen_run"`
	FirstSeenAt  string `json:"first_seen_at"`
	LastSeenAt   string `json:"last_seen_at"`
}

type pspRun struct {
	RunID           int64      `json:"run_id"`
	Status          string     `json:"status"`
	Trigger         string     `json:"trigger"`
	RequestedBy     *string    `json:"requested_by"`
	RequestedAt     time.Time  `json:"requested_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	Attempts        int        `json:"attempts"`
	EventsFound     int        `json:"events_found"`
	EventsRecovered int        `json:"events_recovered"`
	EventsPresent   int        `json:"events_present"`
	Disagreements   int        `json:"disagreement_count"`
	New             int        `json:"disagreements_new"`
	StillOpen       int        `json:"disagreements_still_open"`
	Cleared         int        `json:"disagreements_cleared"`
	Providers       map[string]struct {
		WindowFrom      string   `json:"window_from"`
		WindowTo        string   `json:"window_to"`
		EventsFound     int      `json:"events_found"`
		EventsRecovered int      `json:"events_recovered"`
		EventsPresent   int      `json:"events_present"`
		ObjectsChecked  int      `json:"objects_checked"`
		Errors          []string `json:"errors"`
		Compared        bool     `json:"compared"`
	} `json:"providers"`
	List  []pspDisagreement `json:"disagreements"`
	Open  []pspDisagreement `json:"open_disagreements"`
	Error *string           `json:"error"`
}

func (r pspRun) finished() bool { return r.Status == "succeeded" || r.Status == "failed" }

// healthy: not failed, and no disagreement found.
func (r pspRun) healthy() bool { return r.Status != "failed" && r.Disagreements == 0 }

func (a *app) pspReconciliationCmd() *cobra.Command {
	var follow bool
	var interval time.Duration
	return group("psp-reconciliation", "The PSP reconciliation: what the PSPs' own records say against ours",
		a.command(leaf{
			use:   "show [RUN_ID]",
			short: "The latest PSP reconciliation run, or the one given (exit 6 when it failed or disagrees)",
			long: `The latest PSP reconciliation run (requested, running or finished), or the
run RUN_ID: per PSP what was read, and every disagreement it found.
Exit 6 when the run failed or found disagreements.`,
			ops:  []string{"GET /v1/psp-reconciliation", "GET /v1/psp-reconciliation/{id}"},
			args: cobra.MaximumNArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				path := "/v1/psp-reconciliation"
				if len(args) == 1 {
					id, err := oneID("psp-reconciliation show", args)
					if err != nil {
						return err
					}
					path += "/" + strconv.FormatInt(id, 10)
				}
				var r pspRun
				raw, err := e.c.getJSON(ctx, path, nil, &r)
				if err != nil {
					return err
				}
				return e.printPSPRun(raw, r)
			},
		}),
		a.command(leaf{
			use:   "disagreements",
			short: "Every disagreement open now, oldest first (exit 6 when there is one)",
			ops:   []string{"GET /v1/psp-reconciliation"},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				var r pspRun
				raw, err := e.c.getJSON(ctx, "/v1/psp-reconciliation", nil, &r)
				if err != nil {
					return err
				}
				if e.structured() {
					var only struct {
						Open json.RawMessage `json:"open_disagreements"`
					}
					if err := json.Unmarshal(raw, &only); err != nil {
						return fmt.Errorf("decode PSP reconciliation: %w", err)
					}
					if err := e.printJSON(map[string]any{"items": only.Open}); err != nil {
						return err
					}
				} else {
					t := newTable(e.out, "PROVIDER", "KIND", "PAYOUT", "PSP OBJECT", "PSP STATUS", "LEDGER STATUS", "SINCE RUN", "FIRST SEEN", "DETAIL")
					for _, d := range r.Open {
						t.row(d.Provider, d.Kind, first(d.PayoutID, "-"), first(d.PSPObjectID, "-"), first(d.PSPStatus, "-"),
							first(d.LedgerStatus, "-"), strconv.FormatInt(d.FirstSeenRun, 10), d.FirstSeenAt, clip(oneLine(d.Detail), 80))
					}
					if err := t.flush(); err != nil {
						return err
					}
				}
				if len(r.Open) > 0 {
					return errUnhealthy
				}
				return nil
			},
		}),
		a.command(leaf{
			use:   "run",
			short: "Request a PSP reconciliation run now (operator); webhook-api works it within seconds",
			long: `Request a PSP reconciliation run now (operator). webhook-api works it within
seconds; --follow waits for it to finish and shows it (exit 6 when it failed
or found disagreements). One run at a time: exit 5 while one is requested or
running.`,
			ops: []string{"POST /v1/psp-reconciliation", "GET /v1/psp-reconciliation/{id}"},
			flags: func(fs *pflag.FlagSet) {
				fs.BoolVar(&follow, "follow", false, "wait for the run to finish")
				fs.DurationVar(&interval, "interval", time.Second, "how often --follow asks")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				if follow && interval < 100*time.Millisecond {
					return usageErrorf("--interval must be at least 100ms")
				}
				var r pspRun
				raw, err := e.c.do(ctx, http.MethodPost, "/v1/psp-reconciliation", nil, nil)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("decode PSP reconciliation: %w", err)
				}
				if !follow {
					if e.structured() {
						return e.printRaw(raw)
					}
					_, err := fmt.Fprintf(e.out, "PSP reconciliation %d requested; see it with: aegisctl psp-reconciliation show %d\n", r.RunID, r.RunID)
					return err
				}
				path := "/v1/psp-reconciliation/" + strconv.FormatInt(r.RunID, 10)
				for !r.finished() {
					select {
					case <-ctx.Done():
						return fmt.Errorf("stopped waiting for PSP reconciliation %d (it goes on): %w", r.RunID, ctx.Err())
					case <-time.After(interval):
					}
					if raw, err = e.c.getJSON(ctx, path, nil, &r); err != nil {
						return err
					}
				}
				return e.printPSPRun(raw, r)
			},
		}),
	)
}

// printPSPRun prints a run; a finished run that failed or disagrees is
// unhealthy.
func (e *env) printPSPRun(raw json.RawMessage, r pspRun) error {
	if e.structured() {
		if err := e.printRaw(raw); err != nil {
			return err
		}
	} else if err := e.pspRunTable(r); err != nil {
		return err
	}
	if r.finished() && !r.healthy() {
		return errUnhealthy
	}
	return nil
}

func (e *env) pspRunTable(r pspRun) error {
	who := r.Trigger
	if r.RequestedBy != nil {
		who += " by " + *r.RequestedBy
	}
	when := "requested " + r.RequestedAt.UTC().Format(time.RFC3339)
	if r.FinishedAt != nil {
		when = "finished " + ts(r.FinishedAt)
	}
	verdict := strings.ToUpper(r.Status)
	if r.Status == "succeeded" {
		verdict = "OK"
		if r.Disagreements > 0 {
			verdict = fmt.Sprintf("%d DISAGREEMENTS", r.Disagreements)
		}
	}
	fmt.Fprintf(e.out, "PSP reconciliation %d (%s, %s, %d attempts): %s\n", r.RunID, who, when, r.Attempts, verdict)
	fmt.Fprintf(e.out, "%d events found, %d recovered, %d present; disagreements %d new, %d still open, %d cleared\n",
		r.EventsFound, r.EventsRecovered, r.EventsPresent, r.New, r.StillOpen, r.Cleared)
	if r.Error != nil && *r.Error != "" {
		fmt.Fprintf(e.out, "error: %s\n", oneLine(*r.Error))
	}
	if len(r.Providers) > 0 {
		names := make([]string, 0, len(r.Providers))
		for n := range r.Providers {
			names = append(names, n)
		}
		sort.Strings(names)
		t := newTable(e.out, "PROVIDER", "FROM", "TO", "FOUND", "RECOVERED", "PRESENT", "CHECKED", "COMPARED", "ERRORS")
		for _, n := range names {
			p := r.Providers[n]
			t.row(n, p.WindowFrom, p.WindowTo, strconv.Itoa(p.EventsFound), strconv.Itoa(p.EventsRecovered),
				strconv.Itoa(p.EventsPresent), strconv.Itoa(p.ObjectsChecked), strconv.FormatBool(p.Compared),
				clip(oneLine(strings.Join(p.Errors, "; ")), 80))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(r.List) > 0 {
		t := newTable(e.out, "PROVIDER", "KIND", "STATE", "PAYOUT", "PSP OBJECT", "PSP STATUS", "LEDGER STATUS", "DETAIL")
		for _, d := range r.List {
			t.row(d.Provider, d.Kind, first(d.State, "-"), first(d.PayoutID, "-"), first(d.PSPObjectID, "-"),
				first(d.PSPStatus, "-"), first(d.LedgerStatus, "-"), clip(oneLine(d.Detail), 80))
		}
		return t.flush()
	}
	return nil
}
