package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// filterFlags are the list and bulk filters, as the API names them.
type filterFlags struct {
	topic, status, errorClass, since, until  string
	payoutID, user, correlationID, eventType string
}

func (f *filterFlags) define(fs *pflag.FlagSet, withStatus bool) {
	fs.StringVar(&f.topic, "topic", "", "original topic (aegis.transactions, not its .dlq)")
	fs.StringVar(&f.errorClass, "error-class", "", "error class (permanent, transient, …)")
	fs.StringVar(&f.payoutID, "payout-id", "", "the payout the letter is about")
	fs.StringVar(&f.user, "user", "", "the partition key: the wallet owner's user id")
	fs.StringVar(&f.correlationID, "correlation-id", "", "correlation id")
	fs.StringVar(&f.eventType, "event-type", "", "the record's event_type header")
	fs.StringVar(&f.since, "since", "", "failed at or after (RFC 3339)")
	fs.StringVar(&f.until, "until", "", "failed before (RFC 3339)")
	if withStatus {
		fs.StringVar(&f.status, "status", "", "open, replayed or discarded")
	}
}

func (f filterFlags) query() url.Values {
	q := url.Values{}
	for k, v := range f.fields() {
		q.Set(k, v)
	}
	return q
}

// fields are the filters given, by the API's names.
func (f filterFlags) fields() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{"topic": f.topic, "status": f.status, "error_class": f.errorClass,
		"since": f.since, "until": f.until, "payout_id": f.payoutID, "user": f.user,
		"correlation_id": f.correlationID, "event_type": f.eventType} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

func (a *app) whoamiCmd() *cobra.Command {
	return a.command(leaf{
		use:   "whoami",
		short: "Who the token is: its name (the actor in the audit log) and role",
		ops:   []string{"GET /v1/me"},
		run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
			return send(ctx, e, http.MethodGet, "/v1/me", nil, nil, func(me struct {
				Name string `json:"name"`
				Role string `json:"role"`
			}) error {
				_, err := fmt.Fprintf(e.out, "%s (%s)\n", me.Name, me.Role)
				return err
			})
		},
	})
}

func (a *app) deadLettersCmd() *cobra.Command {
	var list, groups filterFlags
	var limit int
	var all bool
	var replayReason, discardReason string
	return group("dead-letters", "Dead letters: list, show, group, replay and discard them, one or in bulk",
		a.command(leaf{
			use:     "list",
			short:   "List dead letters, newest first",
			example: "  aegisctl dead-letters list --status open --error-class permanent\n  aegisctl dead-letters list --topic aegis.payouts --all -o json",
			ops:     []string{"GET /v1/dead-letters"},
			flags: func(fs *pflag.FlagSet) {
				list.define(fs, true)
				fs.IntVar(&limit, "limit", 50, "page size")
				fs.BoolVar(&all, "all", false, "every page")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.listLetters(ctx, list, limit, all)
			},
		}),
		a.command(leaf{
			use:   "show ID",
			short: "One dead letter: its error, headers and (redacted) payload",
			ops:   []string{"GET /v1/dead-letters/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.showLetter(ctx, args)
			},
		}),
		a.command(leaf{
			use:   "stats",
			short: "Depth by topic and status, and the oldest open letter's age",
			ops:   []string{"GET /v1/dead-letters/stats"},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.stats(ctx)
			},
		}),
		a.command(leaf{
			use:   "groups",
			short: "Open letters by error class and normalised message, with counts",
			ops:   []string{"GET /v1/dead-letters/groups"},
			flags: func(fs *pflag.FlagSet) { groups.define(fs, true) },
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.groups(ctx, groups)
			},
		}),
		a.command(leaf{
			use:   "replay ID",
			short: "Replay one open dead letter (operator)",
			ops:   []string{"POST /v1/dead-letters/{id}/replay"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.StringVar(&replayReason, "reason", "", "kept in the audit log") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.replay(ctx, args, replayReason)
			},
		}),
		a.command(leaf{
			use:   "discard ID",
			short: "Close one open dead letter without replaying it (operator)",
			ops:   []string{"POST /v1/dead-letters/{id}/discard"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&discardReason, "reason", "", "why (required; kept in the audit log)")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.discard(ctx, args, discardReason)
			},
		}),
		a.bulkReplayCmd(),
		a.bulkDiscardCmd(),
	)
}

func (e *env) listLetters(ctx context.Context, f filterFlags, limit int, all bool) error {
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
			if e.structured() {
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
	if e.structured() {
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

func (e *env) showLetter(ctx context.Context, pos []string) error {
	id, err := oneID("dead-letters show", pos)
	if err != nil {
		return err
	}
	var l letter
	raw, err := e.c.getJSON(ctx, fmt.Sprintf("/v1/dead-letters/%d", id), nil, &l)
	if err != nil {
		return err
	}
	if e.structured() {
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

func (e *env) groups(ctx context.Context, f filterFlags) error {
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
	if e.structured() {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "COUNT", "CLASS", "NEWEST", "SAMPLE", "MESSAGE")
	for _, g := range out.Items {
		t.row(fmt.Sprint(g.Count), g.ErrorClass, g.Newest, fmt.Sprint(g.SampleID), g.Message)
	}
	return t.flush()
}

func (e *env) stats(ctx context.Context) error {
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
	if e.structured() {
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

func (e *env) replay(ctx context.Context, pos []string, reason string) error {
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

func (e *env) discard(ctx context.Context, pos []string, reason string) error {
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
	if e.structured() {
		return e.printRaw(raw)
	}
	fmt.Fprintf(e.out, "dead letter %d discarded\n", id)
	return nil
}

// bulkFlags are what bulk-replay and bulk-discard select and say.
type bulkFlags struct {
	f           filterFlags
	ids         []int64
	maxN        int
	reason      string
	dryRun, yes bool
}

func (b *bulkFlags) define(fs *pflag.FlagSet, maxUsage string) {
	b.f.define(fs, false)
	fs.Int64SliceVar(&b.ids, "ids", nil, "only these letters (comma-separated ids), among those the filters match")
	fs.IntVar(&b.maxN, "max", 0, maxUsage)
	fs.StringVar(&b.reason, "reason", "", "kept in the audit log")
	fs.BoolVar(&b.dryRun, "dry-run", false, "only show what would be done (exit 0)")
	fs.BoolVar(&b.yes, "yes", false, "do it, after the dry run")
}

// body is the request; dry_run true.
func (b bulkFlags) body() map[string]any {
	body := map[string]any{"dry_run": true}
	for k, v := range b.f.fields() {
		body[k] = v
	}
	if b.maxN > 0 {
		body["max"] = b.maxN
	}
	if len(b.ids) > 0 {
		body["ids"] = b.ids
	}
	if b.reason != "" {
		body["reason"] = b.reason
	}
	return body
}

func (a *app) bulkReplayCmd() *cobra.Command {
	var b bulkFlags
	var follow bool
	var interval time.Duration
	return a.command(leaf{
		use:   "bulk-replay",
		short: "Replay every open letter matching the filters, at most --max (operator)",
		long: `Replay every open letter matching the filters (or the --ids among them), oldest
first, at most --max, as a replay job.

The dry run always comes first: without --yes only the count is shown and
the command exits 2 (--dry-run: exit 0). With REQUIRE_SECOND_APPROVER the job
waits for a second operator (aegisctl approvals approve ID).`,
		example: "  aegisctl dead-letters bulk-replay --topic aegis.transactions --max 500\n" +
			"  aegisctl dead-letters bulk-replay --topic aegis.transactions --max 500 --reason \"PSP back\" --yes --follow",
		ops: []string{"POST /v1/dead-letters/replay"},
		flags: func(fs *pflag.FlagSet) {
			b.define(fs, "at most how many letters (required)")
			fs.BoolVar(&follow, "follow", false, "follow the job until it ends")
			fs.DurationVar(&interval, "interval", time.Second, "how often --follow asks")
		},
		run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
			return e.bulkReplay(ctx, b, follow, interval)
		},
	})
}

func (e *env) bulkReplay(ctx context.Context, b bulkFlags, follow bool, interval time.Duration) error {
	maxN, dryRun, yes := b.maxN, b.dryRun, b.yes
	if maxN < 1 {
		return usageErrorf("dead-letters bulk-replay needs --max N (at most how many letters)")
	}
	if dryRun && yes {
		return usageErrorf("--dry-run and --yes contradict each other")
	}
	body := b.body()
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
		if e.structured() {
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
		if e.structured() {
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
		if e.structured() {
			return e.printRaw(raw)
		}
		fmt.Fprintf(e.out, "replay job %d queued for up to %d letters; follow it with: aegisctl jobs follow %d\n", j.ID, j.Max, j.ID)
		return nil
	}
	fmt.Fprintf(e.errOut, "replay job %d queued for up to %d letters\n", j.ID, j.Max)
	return e.followJob(ctx, j.ID, interval)
}

func (a *app) bulkDiscardCmd() *cobra.Command {
	var b bulkFlags
	return a.command(leaf{
		use:   "bulk-discard",
		short: "Discard every open letter matching the filters, or the --ids (operator)",
		long: `Close without replaying every open letter matching the filters (or the --ids
among them), oldest first, at most --max (default: the number of --ids).

The dry run always comes first: without --yes only the count is shown and
the command exits 2 (--dry-run: exit 0). --reason is required with --yes.
A letter about a payout that still holds money refuses the whole request
(exit 5, nothing discarded): replay it or resolve the payout first.`,
		example: "  aegisctl dead-letters bulk-discard --error-class permanent --topic aegis.webhook.pending --max 50\n" +
			"  aegisctl dead-letters bulk-discard --ids 41,42 --reason \"duplicates of settled events\" --yes",
		ops:   []string{"POST /v1/dead-letters/discard"},
		flags: func(fs *pflag.FlagSet) { b.define(fs, "at most how many letters (required without --ids)") },
		run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
			return e.bulkDiscard(ctx, b)
		},
	})
}

func (e *env) bulkDiscard(ctx context.Context, b bulkFlags) error {
	if b.maxN < 1 && len(b.ids) == 0 {
		return usageErrorf("dead-letters bulk-discard needs --max N (at most how many letters) or --ids")
	}
	if b.dryRun && b.yes {
		return usageErrorf("--dry-run and --yes contradict each other")
	}
	if b.yes && strings.TrimSpace(b.reason) == "" {
		return usageErrorf("dead-letters bulk-discard needs --reason: it is kept in the audit log")
	}
	type answer struct {
		Matched   int64   `json:"matched"`
		Discarded int64   `json:"discarded"`
		IDs       []int64 `json:"ids"`
	}
	body := b.body()
	// The dry run always comes first, as for a bulk replay.
	raw, err := e.c.do(ctx, http.MethodPost, "/v1/dead-letters/discard", nil, body)
	if err != nil {
		return err
	}
	var preview answer
	if err := json.Unmarshal(raw, &preview); err != nil {
		return fmt.Errorf("decode dry run: %w", err)
	}
	if !b.yes {
		if e.structured() {
			if err := e.printRaw(raw); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.out, "dry run: %d open letters match, %d would be discarded (first ids: %s)\n",
				preview.Matched, preview.Discarded, joinIDs(preview.IDs, 10))
		}
		if b.dryRun {
			return nil
		}
		return usageErrorf("nothing discarded: run again with --yes (and --reason) to discard these %d letters", preview.Discarded)
	}
	if preview.Discarded == 0 {
		fmt.Fprintln(e.errOut, "no open letter matches: nothing to discard")
		return nil
	}
	body["dry_run"] = false
	raw, err = e.c.do(ctx, http.MethodPost, "/v1/dead-letters/discard", nil, body)
	if err != nil {
		return err
	}
	if e.structured() {
		return e.printRaw(raw)
	}
	var done answer
	if err := json.Unmarshal(raw, &done); err != nil {
		return fmt.Errorf("decode bulk discard: %w", err)
	}
	_, err = fmt.Fprintf(e.out, "discarded %d letters (ids: %s)\n", done.Discarded, joinIDs(done.IDs, 20))
	return err
}

func (a *app) jobsCmd() *cobra.Command {
	var limit, lettersLimit int
	var after int64
	var all bool
	var interval time.Duration
	return group("jobs", "Bulk replay jobs: list, show, follow, cancel, and what each did per letter",
		a.command(leaf{
			use:   "list",
			short: "The latest replay jobs, newest first",
			ops:   []string{"GET /v1/replay-jobs"},
			flags: func(fs *pflag.FlagSet) { fs.IntVar(&limit, "limit", 20, "how many") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.listJobs(ctx, limit)
			},
		}),
		a.command(leaf{
			use:   "show ID",
			short: "One replay job and its progress (exit 6 when it failed, was cancelled or failed letters)",
			ops:   []string{"GET /v1/replay-jobs/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.showJob(ctx, args)
			},
		}),
		a.command(leaf{
			use:   "follow ID",
			short: "Show a job's progress until it ends (exit 6 as for show)",
			ops:   []string{"GET /v1/replay-jobs/{id}"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.DurationVar(&interval, "interval", time.Second, "how often to ask") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				id, err := oneID("jobs follow", args)
				if err != nil {
					return err
				}
				return e.followJob(ctx, id, interval)
			},
		}),
		a.command(leaf{
			use:   "letters ID",
			short: "What a job did with each letter it reached: republished, noop, not_replayable or skipped",
			ops:   []string{"GET /v1/replay-jobs/{id}/letters"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.Int64Var(&after, "after", 0, "only letters with a higher id (the last one seen)")
				fs.IntVar(&lettersLimit, "limit", 100, "page size")
				fs.BoolVar(&all, "all", false, "every page")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.jobLetters(ctx, args, after, lettersLimit, all)
			},
		}),
		a.command(leaf{
			use:   "cancel ID",
			short: "Stop a queued or running job (operator); what it replayed stays replayed",
			ops:   []string{"POST /v1/replay-jobs/{id}/cancel"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.cancelJob(ctx, args)
			},
		}),
	)
}

func (e *env) jobLetters(ctx context.Context, pos []string, after int64, limit int, all bool) error {
	id, err := oneID("jobs letters", pos)
	if err != nil {
		return err
	}
	type item struct {
		DeadLetterID int64   `json:"dead_letter_id"`
		Outcome      string  `json:"outcome"`
		OutboxID     *int64  `json:"outbox_id"`
		SubjectState *string `json:"subject_state"`
		Error        *string `json:"error"`
		At           string  `json:"at"`
	}
	var items []item
	var raws []json.RawMessage
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		raw, err := e.c.getJSON(ctx, fmt.Sprintf("/v1/replay-jobs/%d/letters", id), q, &page)
		if err != nil {
			return err
		}
		if !all && e.structured() {
			return e.printRaw(raw)
		}
		for _, r := range page.Items {
			var it item
			if err := json.Unmarshal(r, &it); err != nil {
				return fmt.Errorf("decode job letter: %w", err)
			}
			items, raws = append(items, it), append(raws, r)
			after = it.DeadLetterID
		}
		if !all || len(page.Items) < limit {
			break
		}
	}
	if e.structured() {
		return e.printJSON(map[string]any{"items": raws})
	}
	t := newTable(e.out, "LETTER", "OUTCOME", "OUTBOX", "SUBJECT STATE", "AT", "ERROR")
	for _, it := range items {
		outbox := "-"
		if it.OutboxID != nil {
			outbox = strconv.FormatInt(*it.OutboxID, 10)
		}
		t.row(strconv.FormatInt(it.DeadLetterID, 10), it.Outcome, outbox, first(deref(it.SubjectState), "-"), it.At,
			clip(oneLine(deref(it.Error)), 80))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !all && len(items) == limit {
		fmt.Fprintf(e.errOut, "more: --after %d (or --all)\n", after)
	}
	return nil
}

func (e *env) listJobs(ctx context.Context, limit int) error {
	var l struct {
		Items []job `json:"items"`
	}
	raw, err := e.c.getJSON(ctx, "/v1/replay-jobs", url.Values{"limit": {strconv.Itoa(limit)}}, &l)
	if err != nil {
		return err
	}
	if e.structured() {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "ID", "STATUS", "ACTOR", "MAX", "MATCHED", "REPLAYED", "SKIPPED", "FAILED", "REASON")
	for _, j := range l.Items {
		t.row(strconv.FormatInt(j.ID, 10), j.Status, j.Actor, fmt.Sprint(j.Max), fmt.Sprint(j.Matched),
			fmt.Sprint(j.Replayed), fmt.Sprint(j.Skipped), fmt.Sprint(j.Failed), clip(deref(j.Reason), 40))
	}
	return t.flush()
}

func (e *env) showJob(ctx context.Context, pos []string) error {
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
	if e.structured() {
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

func (e *env) cancelJob(ctx context.Context, pos []string) error {
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

func (a *app) reconciliationCmd() *cobra.Command {
	return group("reconciliation", "The ledger integrity check: its latest run, or a run now",
		a.command(leaf{
			use:   "show",
			short: "The latest ledger integrity check (exit 6 when it found a discrepancy)",
			ops:   []string{"GET /v1/reconciliation"},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.reconciliation(ctx, false)
			},
		}),
		a.command(leaf{
			use:   "run",
			short: "Run the ledger integrity check now (operator; exit 6 on a discrepancy)",
			ops:   []string{"POST /v1/reconciliation"},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.reconciliation(ctx, true)
			},
		}),
	)
}

func (e *env) reconciliation(ctx context.Context, runNow bool) error {
	var raw json.RawMessage
	var err error
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
	if e.structured() {
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
