package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// letter is the part of a dead letter the tables show.
type letter struct {
	ID               int64           `json:"id"`
	Source           string          `json:"source"`
	OriginalTopic    string          `json:"original_topic"`
	PartitionKey     string          `json:"partition_key"`
	EventType        string          `json:"event_type"`
	Error            string          `json:"error"`
	ErrorClass       string          `json:"error_class"`
	RetryCount       int             `json:"retry_count"`
	CorrelationID    string          `json:"correlation_id"`
	Status           string          `json:"status"`
	ReplayCount      int             `json:"replay_count"`
	ResolvedBy       *string         `json:"resolved_by"`
	ResolutionReason *string         `json:"resolution_reason"`
	FailedAt         time.Time       `json:"failed_at"`
	Payload          json.RawMessage `json:"payload"`
	Headers          json.RawMessage `json:"headers"`
}

type job struct {
	ID        int64   `json:"id"`
	Actor     string  `json:"actor"`
	Reason    *string `json:"reason"`
	Max       int     `json:"max"`
	Status    string  `json:"status"`
	Matched   int     `json:"matched"`
	Replayed  int     `json:"replayed"`
	Skipped   int     `json:"skipped"`
	Failed    int     `json:"failed"`
	LastError *string `json:"last_error"`
}

func (j job) finished() bool {
	return j.Status == "done" || j.Status == "failed" || j.Status == "cancelled"
}

func (j job) healthy() bool { return j.Status == "done" && j.Failed == 0 }

// flags parses a subcommand's flags; positional arguments may come before
// or after them.
func flags(name string, args []string, define func(*flag.FlagSet)) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if define != nil {
		define(fs)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageErrorf("%s: %v", name, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// oneID parses the single positional ID argument.
func oneID(name string, pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, usageErrorf("%s needs one ID", name)
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return 0, usageErrorf("%s: ID must be a positive integer, got %q", name, pos[0])
	}
	return id, nil
}

func noArgs(name string, pos []string) error {
	if len(pos) != 0 {
		return usageErrorf("%s takes no arguments, got %q", name, strings.Join(pos, " "))
	}
	return nil
}

// filterFlags are the list and bulk-replay filters, as the API names them.
type filterFlags struct {
	topic, status, errorClass, since, until  string
	payoutID, user, correlationID, eventType string
}

func (f *filterFlags) define(fs *flag.FlagSet, withStatus bool) {
	fs.StringVar(&f.topic, "topic", "", "")
	fs.StringVar(&f.errorClass, "error-class", "", "")
	fs.StringVar(&f.payoutID, "payout-id", "", "")
	fs.StringVar(&f.user, "user", "", "")
	fs.StringVar(&f.correlationID, "correlation-id", "", "")
	fs.StringVar(&f.eventType, "event-type", "", "")
	fs.StringVar(&f.since, "since", "", "")
	fs.StringVar(&f.until, "until", "", "")
	if withStatus {
		fs.StringVar(&f.status, "status", "", "")
	}
}

func (f filterFlags) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"topic": f.topic, "status": f.status, "error_class": f.errorClass,
		"since": f.since, "until": f.until, "payout_id": f.payoutID, "user": f.user,
		"correlation_id": f.correlationID, "event_type": f.eventType} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func (e *env) listLetters(ctx context.Context, args []string) error {
	var f filterFlags
	var limit int
	var all bool
	pos, err := flags("dead-letters list", args, func(fs *flag.FlagSet) {
		f.define(fs, true)
		fs.IntVar(&limit, "limit", 50, "")
		fs.BoolVar(&all, "all", false, "")
	})
	if err != nil {
		return err
	}
	if err := noArgs("dead-letters list", pos); err != nil {
		return err
	}
	q := f.query()
	q.Set("limit", strconv.Itoa(limit))
	var items []json.RawMessage
	for {
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"next_cursor"`
		}
		raw, err := e.c.getJSON(ctx, "/v1/dead-letters", q, &page)
		if err != nil {
			return err
		}
		if !all {
			if e.json {
				return e.printRaw(raw)
			}
			return e.letterTable(page.Items, page.NextCursor)
		}
		items = append(items, page.Items...)
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	if e.json {
		return e.printJSON(map[string]any{"items": items, "next_cursor": ""})
	}
	return e.letterTable(items, "")
}

func (e *env) letterTable(items []json.RawMessage, next string) error {
	t := newTable(e.out, "ID", "STATUS", "CLASS", "TOPIC", "EVENT", "KEY", "FAILED", "ERROR")
	for _, raw := range items {
		var l letter
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("decode dead letter: %w", err)
		}
		t.row(strconv.FormatInt(l.ID, 10), l.Status, l.ErrorClass, l.OriginalTopic, l.EventType,
			clip(l.PartitionKey, 24), l.FailedAt.UTC().Format(time.RFC3339), clip(oneLine(l.Error), 80))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.errOut, "more: --all, or the API's cursor %s\n", next)
	}
	return nil
}

func (e *env) showLetter(ctx context.Context, args []string) error {
	pos, err := flags("dead-letters show", args, nil)
	if err != nil {
		return err
	}
	id, err := oneID("dead-letters show", pos)
	if err != nil {
		return err
	}
	var l letter
	raw, err := e.c.getJSON(ctx, fmt.Sprintf("/v1/dead-letters/%d", id), nil, &l)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	t := newTable(e.out)
	t.row("id", strconv.FormatInt(l.ID, 10))
	t.row("status", l.Status)
	if l.ResolvedBy != nil {
		t.row("resolved by", *l.ResolvedBy+": "+deref(l.ResolutionReason))
	}
	t.row("source", l.Source)
	t.row("topic", l.OriginalTopic)
	t.row("event type", l.EventType)
	t.row("partition key", l.PartitionKey)
	t.row("correlation id", l.CorrelationID)
	t.row("failed at", l.FailedAt.UTC().Format(time.RFC3339))
	t.row("retries, replays", fmt.Sprintf("%d, %d", l.RetryCount, l.ReplayCount))
	t.row("error class", l.ErrorClass)
	t.row("error", oneLine(l.Error))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.out, "headers:")
	if err := e.indent(l.Headers); err != nil {
		return err
	}
	fmt.Fprintln(e.out, "payload (redacted):")
	return e.indent(l.Payload)
}

func (e *env) groups(ctx context.Context, args []string) error {
	var f filterFlags
	pos, err := flags("dead-letters groups", args, func(fs *flag.FlagSet) { f.define(fs, true) })
	if err != nil {
		return err
	}
	if err := noArgs("dead-letters groups", pos); err != nil {
		return err
	}
	var out struct {
		Items []struct {
			ErrorClass string `json:"error_class"`
			Message    string `json:"message"`
			Count      int64  `json:"count"`
			Newest     string `json:"newest_failed_at"`
			SampleID   int64  `json:"sample_id"`
		} `json:"items"`
	}
	raw, err := e.c.getJSON(ctx, "/v1/dead-letters/groups", f.query(), &out)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "COUNT", "CLASS", "NEWEST", "SAMPLE", "MESSAGE")
	for _, g := range out.Items {
		t.row(fmt.Sprint(g.Count), g.ErrorClass, g.Newest, fmt.Sprint(g.SampleID), g.Message)
	}
	return t.flush()
}

func (e *env) stats(ctx context.Context, args []string) error {
	pos, err := flags("dead-letters stats", args, nil)
	if err != nil {
		return err
	}
	if err := noArgs("dead-letters stats", pos); err != nil {
		return err
	}
	type counts map[string]int64
	var s struct {
		ByStatus   counts `json:"by_status"`
		OldestOpen *int64 `json:"oldest_open_age_seconds"`
		Topics     []struct {
			Topic      string `json:"topic"`
			ByStatus   counts `json:"by_status"`
			OldestOpen *int64 `json:"oldest_open_age_seconds"`
		} `json:"topics"`
	}
	raw, err := e.c.getJSON(ctx, "/v1/dead-letters/stats", nil, &s)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "TOPIC", "OPEN", "REPLAYED", "DISCARDED", "OLDEST OPEN")
	for _, tp := range s.Topics {
		t.row(tp.Topic, fmt.Sprint(tp.ByStatus["open"]), fmt.Sprint(tp.ByStatus["replayed"]),
			fmt.Sprint(tp.ByStatus["discarded"]), age(tp.OldestOpen))
	}
	t.row("all", fmt.Sprint(s.ByStatus["open"]), fmt.Sprint(s.ByStatus["replayed"]),
		fmt.Sprint(s.ByStatus["discarded"]), age(s.OldestOpen))
	return t.flush()
}

func (e *env) replay(ctx context.Context, args []string) error {
	var reason string
	pos, err := flags("dead-letters replay", args, func(fs *flag.FlagSet) { fs.StringVar(&reason, "reason", "", "") })
	if err != nil {
		return err
	}
	id, err := oneID("dead-letters replay", pos)
	if err != nil {
		return err
	}
	var r struct {
		Outcome  string `json:"outcome"`
		OutboxID int64  `json:"outbox_id"`
		Message  string `json:"message"`
	}
	if printed, err := e.post(ctx, fmt.Sprintf("/v1/dead-letters/%d/replay", id), map[string]string{"reason": reason},
		"replay answer", &r); printed || err != nil {
		return err
	}
	if r.Outcome == "noop" {
		fmt.Fprintf(e.out, "dead letter %d closed, no-op: %s\n", id, r.Message)
		return nil
	}
	fmt.Fprintf(e.out, "dead letter %d replayed: outbox row %d is on its way to Kafka\n", id, r.OutboxID)
	return nil
}

func (e *env) discard(ctx context.Context, args []string) error {
	var reason string
	pos, err := flags("dead-letters discard", args, func(fs *flag.FlagSet) { fs.StringVar(&reason, "reason", "", "") })
	if err != nil {
		return err
	}
	id, err := oneID("dead-letters discard", pos)
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return usageErrorf("dead-letters discard needs --reason: it is kept in the audit log")
	}
	raw, err := e.c.do(ctx, http.MethodPost, fmt.Sprintf("/v1/dead-letters/%d/discard", id), nil, map[string]string{"reason": reason})
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	fmt.Fprintf(e.out, "dead letter %d discarded\n", id)
	return nil
}

func (e *env) bulkReplay(ctx context.Context, args []string) error {
	var f filterFlags
	var maxN int
	var reason string
	var dryRun, yes, follow bool
	var interval time.Duration
	pos, err := flags("dead-letters bulk-replay", args, func(fs *flag.FlagSet) {
		f.define(fs, false)
		fs.IntVar(&maxN, "max", 0, "")
		fs.StringVar(&reason, "reason", "", "")
		fs.BoolVar(&dryRun, "dry-run", false, "")
		fs.BoolVar(&yes, "yes", false, "")
		fs.BoolVar(&follow, "follow", false, "")
		fs.DurationVar(&interval, "interval", time.Second, "")
	})
	if err != nil {
		return err
	}
	if err := noArgs("dead-letters bulk-replay", pos); err != nil {
		return err
	}
	if maxN < 1 {
		return usageErrorf("dead-letters bulk-replay needs --max N (at most how many letters)")
	}
	if dryRun && yes {
		return usageErrorf("--dry-run and --yes contradict each other")
	}
	body := map[string]any{"max": maxN, "dry_run": true}
	for k, v := range map[string]string{"topic": f.topic, "error_class": f.errorClass, "since": f.since, "until": f.until,
		"payout_id": f.payoutID, "user": f.user, "correlation_id": f.correlationID, "event_type": f.eventType, "reason": reason} {
		if v != "" {
			body[k] = v
		}
	}
	// The dry run always comes first: nobody replays a count they have
	// not seen.
	raw, err := e.c.do(ctx, http.MethodPost, "/v1/dead-letters/replay", nil, body)
	if err != nil {
		return err
	}
	var preview struct {
		Matched     int64   `json:"matched"`
		WouldReplay int64   `json:"would_replay"`
		IDs         []int64 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &preview); err != nil {
		return fmt.Errorf("decode dry run: %w", err)
	}
	if !yes {
		if e.json {
			if err := e.printRaw(raw); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.out, "dry run: %d open letters match, %d would be replayed (first ids: %s)\n",
				preview.Matched, preview.WouldReplay, joinIDs(preview.IDs, 10))
		}
		if dryRun {
			return nil
		}
		return usageErrorf("nothing replayed: run again with --yes to replay these %d letters", preview.WouldReplay)
	}
	if preview.WouldReplay == 0 {
		fmt.Fprintln(e.errOut, "no open letter matches: nothing to replay")
		return nil
	}
	body["dry_run"] = false
	raw, err = e.c.do(ctx, http.MethodPost, "/v1/dead-letters/replay", nil, body)
	if err != nil {
		return err
	}
	var held struct {
		Approval *approvalRow `json:"approval"`
	}
	if err := json.Unmarshal(raw, &held); err == nil && held.Approval != nil {
		// Four-eyes: no job until a second operator approves.
		if e.json {
			return e.printRaw(raw)
		}
		fmt.Fprintf(e.out, "bulk replay of %d letters awaits a second operator: aegisctl approvals approve %d\n",
			preview.WouldReplay, held.Approval.ID)
		return nil
	}
	var j job
	if err := json.Unmarshal(raw, &j); err != nil {
		return fmt.Errorf("decode replay job: %w", err)
	}
	if !follow {
		if e.json {
			return e.printRaw(raw)
		}
		fmt.Fprintf(e.out, "replay job %d queued for up to %d letters; follow it with: aegisctl jobs follow %d\n", j.ID, j.Max, j.ID)
		return nil
	}
	fmt.Fprintf(e.errOut, "replay job %d queued for up to %d letters\n", j.ID, j.Max)
	return e.followJob(ctx, j.ID, interval)
}

func (e *env) listJobs(ctx context.Context, args []string) error {
	var limit int
	pos, err := flags("jobs list", args, func(fs *flag.FlagSet) { fs.IntVar(&limit, "limit", 20, "") })
	if err != nil {
		return err
	}
	if err := noArgs("jobs list", pos); err != nil {
		return err
	}
	var l struct {
		Items []job `json:"items"`
	}
	raw, err := e.c.getJSON(ctx, "/v1/replay-jobs", url.Values{"limit": {strconv.Itoa(limit)}}, &l)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "ID", "STATUS", "ACTOR", "MAX", "MATCHED", "REPLAYED", "SKIPPED", "FAILED", "REASON")
	for _, j := range l.Items {
		t.row(strconv.FormatInt(j.ID, 10), j.Status, j.Actor, fmt.Sprint(j.Max), fmt.Sprint(j.Matched),
			fmt.Sprint(j.Replayed), fmt.Sprint(j.Skipped), fmt.Sprint(j.Failed), clip(deref(j.Reason), 40))
	}
	return t.flush()
}

func (e *env) showJob(ctx context.Context, args []string) error {
	pos, err := flags("jobs show", args, nil)
	if err != nil {
		return err
	}
	id, err := oneID("jobs show", pos)
	if err != nil {
		return err
	}
	var j job
	raw, err := e.c.getJSON(ctx, fmt.Sprintf("/v1/replay-jobs/%d", id), nil, &j)
	if err != nil {
		return err
	}
	return e.printJob(raw, j)
}

func (e *env) followJobCmd(ctx context.Context, args []string) error {
	var interval time.Duration
	pos, err := flags("jobs follow", args, func(fs *flag.FlagSet) { fs.DurationVar(&interval, "interval", time.Second, "") })
	if err != nil {
		return err
	}
	id, err := oneID("jobs follow", pos)
	if err != nil {
		return err
	}
	return e.followJob(ctx, id, interval)
}

// followJob polls job id until it ends, drawing its progress on stderr, then
// prints it. A job that did not end done without failures is unhealthy.
func (e *env) followJob(ctx context.Context, id int64, interval time.Duration) error {
	if interval < 100*time.Millisecond {
		return usageErrorf("--interval must be at least 100ms")
	}
	path := fmt.Sprintf("/v1/replay-jobs/%d", id)
	last := ""
	for {
		var j job
		raw, err := e.c.getJSON(ctx, path, nil, &j)
		if err != nil {
			return err
		}
		if line := progress(j); line != last {
			if e.interactive {
				fmt.Fprintf(e.errOut, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(e.errOut, line)
			}
			last = line
		}
		if j.finished() {
			if e.interactive {
				fmt.Fprintln(e.errOut)
			}
			return e.printJob(raw, j)
		}
		select {
		case <-ctx.Done():
			if e.interactive {
				fmt.Fprintln(e.errOut)
			}
			return fmt.Errorf("stopped following job %d (it keeps running; cancel it with aegisctl jobs cancel %d): %w", id, id, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// progress is one line: a bar over the letters the job will handle.
func progress(j job) string {
	total := min(j.Matched, j.Max)
	done := j.Replayed + j.Skipped + j.Failed
	const width = 30
	filled := 0
	pct := 0
	if total > 0 {
		filled = min(width, done*width/total)
		pct = min(100, done*100/total)
	}
	return fmt.Sprintf("job %d [%s%s] %3d%% %d/%d  replayed %d  skipped %d  failed %d  %s",
		j.ID, strings.Repeat("#", filled), strings.Repeat("-", width-filled), pct, done, total,
		j.Replayed, j.Skipped, j.Failed, j.Status)
}

func (e *env) printJob(raw json.RawMessage, j job) error {
	if e.json {
		if err := e.printRaw(raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.out, "job %d %s: %d matched, %d replayed, %d skipped, %d failed (max %d, by %s)\n",
			j.ID, j.Status, j.Matched, j.Replayed, j.Skipped, j.Failed, j.Max, j.Actor)
		if j.LastError != nil && *j.LastError != "" {
			fmt.Fprintf(e.out, "last error: %s\n", oneLine(*j.LastError))
		}
	}
	if j.finished() && !j.healthy() {
		return errUnhealthy
	}
	return nil
}

func (e *env) cancelJob(ctx context.Context, args []string) error {
	pos, err := flags("jobs cancel", args, nil)
	if err != nil {
		return err
	}
	id, err := oneID("jobs cancel", pos)
	if err != nil {
		return err
	}
	var j job
	if printed, err := e.post(ctx, fmt.Sprintf("/v1/replay-jobs/%d/cancel", id), nil, "replay job", &j); printed || err != nil {
		return err
	}
	fmt.Fprintf(e.out, "job %d cancelled after %d replayed; those stay replayed\n", j.ID, j.Replayed)
	return nil
}

func (e *env) reconciliation(ctx context.Context, args []string, runNow bool) error {
	name := "reconciliation show"
	if runNow {
		name = "reconciliation run"
	}
	pos, err := flags(name, args, nil)
	if err != nil {
		return err
	}
	if err := noArgs(name, pos); err != nil {
		return err
	}
	var raw json.RawMessage
	if runNow {
		raw, err = e.c.do(ctx, http.MethodPost, "/v1/reconciliation", nil, nil)
	} else {
		raw, err = e.c.do(ctx, http.MethodGet, "/v1/reconciliation", nil, nil)
	}
	if err != nil {
		return err
	}
	var r struct {
		ID         int64     `json:"id"`
		OK         bool      `json:"ok"`
		Trigger    string    `json:"trigger"`
		FinishedAt time.Time `json:"finished_at"`
		Summary    struct {
			Transactions int64 `json:"transactions"`
			Entries      int64 `json:"entries"`
			UserWallets  int64 `json:"user_wallets"`
			Unbalanced   int64 `json:"unbalanced_transactions"`
			Mismatches   int64 `json:"wallet_mismatches"`
			Negative     int64 `json:"negative_wallets"`
			Wallets      []struct {
				Owner    string   `json:"owner"`
				Currency string   `json:"currency"`
				Stored   int64    `json:"stored"`
				Computed int64    `json:"computed"`
				Problems []string `json:"problems"`
			} `json:"wallets"`
			Holds []struct {
				PayoutID string `json:"payout_id"`
				Status   string `json:"status"`
				Currency string `json:"currency"`
				Held     int64  `json:"held"`
			} `json:"holds"`
			HeldPayouts []struct {
				PayoutID string `json:"payout_id"`
				Status   string `json:"status"`
				Currency string `json:"currency"`
				Expected int64  `json:"expected"`
				Actual   int64  `json:"actual"`
			} `json:"held_payouts"`
			Disputes []struct {
				Dispute  string `json:"dispute"`
				State    string `json:"state"`
				Currency string `json:"currency"`
				Expected int64  `json:"expected"`
				Actual   int64  `json:"actual"`
			} `json:"disputes"`
			Receivables []struct {
				UserID     string `json:"user_id"`
				Currency   string `json:"currency"`
				Owed       int64  `json:"owed"`
				LedgerOwed int64  `json:"ledger_owed"`
			} `json:"receivables"`
			Accounts []struct {
				Owner    string `json:"owner"`
				Currency string `json:"currency"`
				Expected int64  `json:"expected"`
				Actual   int64  `json:"actual"`
			} `json:"account_problems"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decode reconciliation: %w", err)
	}
	if e.json {
		if err := e.printRaw(raw); err != nil {
			return err
		}
	} else {
		verdict := "OK"
		if !r.OK {
			verdict = "DISCREPANCY"
		}
		s := r.Summary
		fmt.Fprintf(e.out, "reconciliation %d (%s, finished %s): %s\n", r.ID, r.Trigger, r.FinishedAt.UTC().Format(time.RFC3339), verdict)
		fmt.Fprintf(e.out, "%d transactions, %d entries, %d user wallets; %d unbalanced transactions, %d wallet mismatches, %d negative wallets\n",
			s.Transactions, s.Entries, s.UserWallets, s.Unbalanced, s.Mismatches, s.Negative)
		if len(s.Wallets) > 0 {
			t := newTable(e.out, "OWNER", "CURRENCY", "STORED", "COMPUTED", "PROBLEMS")
			for _, w := range s.Wallets {
				t.row(w.Owner, w.Currency, fmt.Sprint(w.Stored), fmt.Sprint(w.Computed), strings.Join(w.Problems, ","))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		// What the system accounts hold money for, where it disagrees:
		// expected is what the payout, dispute or user says, actual the
		// account's share (for receivables: the owed on the wallet row
		// against what the receivables account says the user owes).
		var rows [][]string
		for _, h := range s.Holds {
			rows = append(rows, []string{"payout_holds", "payout " + h.PayoutID + " (" + h.Status + ")", h.Currency, "0", fmt.Sprint(h.Held)})
		}
		for _, h := range s.HeldPayouts {
			rows = append(rows, []string{"payout_holds", "payout " + h.PayoutID + " (" + h.Status + ")", h.Currency, fmt.Sprint(h.Expected), fmt.Sprint(h.Actual)})
		}
		for _, d := range s.Disputes {
			rows = append(rows, []string{"disputes", "dispute " + d.Dispute + " (" + d.State + ")", d.Currency, fmt.Sprint(d.Expected), fmt.Sprint(d.Actual)})
		}
		for _, u := range s.Receivables {
			rows = append(rows, []string{"receivables", "user " + u.UserID + " owes", u.Currency, fmt.Sprint(u.Owed), fmt.Sprint(u.LedgerOwed)})
		}
		for _, a := range s.Accounts {
			rows = append(rows, []string{a.Owner, "account total", a.Currency, fmt.Sprint(a.Expected), fmt.Sprint(a.Actual)})
		}
		if len(rows) > 0 {
			t := newTable(e.out, "ACCOUNT", "FOR", "CURRENCY", "EXPECTED", "ACTUAL")
			for _, row := range rows {
				t.row(row...)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
	if !r.OK {
		return errUnhealthy
	}
	return nil
}
