// Package pspsync is the PSP reconciliation: it recovers PSP events whose
// webhook never reached us (an endpoint down past the PSP's retry window, a
// secret misconfigured for an hour) and finds where the PSP and the ledger
// disagree.
//
// Why here. The events it recovers are written exactly as webhooks are:
// ingest's normalise → store, the inbox row in webhook_events and its
// outbox row in one transaction, deduplicated by the PSP's event id. Those
// tables are webhook-api's, so the job that writes them runs in
// webhook-api. dlq-admin only requests runs (POST /v1/psp-reconciliation),
// reads them and alerts on their disagreements; psp_reconciliation_runs has
// one writer, webhook-api, and dlq-admin requests a run and ends an
// orphaned one through this service's functions (request_psp_reconciliation_run,
// end_orphaned_psp_run, migration 000033) and reads runs through
// psp_reconciliation_runs_for_ops.
//
// What a run does, per configured PSP:
//   - Reads the PSP's own record of events for a window: from the
//     provider's cursor minus an overlap (the first run: the window before
//     now) to the run's start. Stripe: GET /v1/events?created[gte]=…,
//     paged with stripe-go's iterator, each event kept byte for byte.
//     Paystack has no events API: GET /transaction and GET /transfer, and
//     each successful transaction / decided transfer stands for the webhook
//     it would have sent ({"event": …, "data": <the object>}), which
//     normalises to the same identity (event name and data.id) as the
//     webhook did.
//   - Stripe Connect: a payout to a connected account's external account
//     (payouts.external_account) is a transfer on the platform, then a
//     payout on the connected account, whose payout.paid/failed come from
//     that account (event.account); the platform's GET /v1/events does not
//     list them. So each connected account that has such a payout in
//     flight or changed within the window (ConnectedPayouts in
//     queries.sql, bounded) has its own events listed for the window (GET
//     /v1/events with its Stripe-Account), among the platform's in the
//     order they happened. One account whose events cannot be read is
//     reported; the others are read, and the cursor stays.
//   - Puts every event not stored yet through the webhook path. An event
//     stored already (its webhook came) is counted present; one whose
//     webhook arrives after recovery is answered duplicate. One event that
//     cannot be normalised is reported and skipped: it never stops the
//     others.
//   - Moves the cursor to the run's start, only when the events were read
//     and stored in full: a failed run is read again by the next.
//   - Compares payouts: the PSP's payouts/transfers (by metadata[payout_id]
//     or reference) against ours, per payout: their status, how many are
//     live (two paid or pending objects for one payout is a double
//     payment, naming every object), each one's amount, currency and
//     destination against the payout's, and the live one against the
//     object recorded for it; and our SUCCEEDED payouts against the PSP
//     (looked up by id when the listing did not show them); and stored
//     refund/dispute events against their ledger posting (payment_returns).
//     A payout to a connected account's external account is compared on
//     both levels (connect.go), each disagreement naming its level: its
//     transfer (at most one live; amount, currency, the connected account;
//     the live one psp_transfer; live with the payout FAILED here, or
//     reversed with it SUCCEEDED here, disagrees) and the connected
//     account's payouts, listed with its Stripe-Account (at most one live;
//     amount, currency, the external account on that account; the live one
//     psp_reference; its status judged against ours: it, not the transfer,
//     is what SUCCEEDED means). An object recorded here and not listed is
//     read by its id; a payout SUCCEEDED here without one of its objects
//     disagrees. The connected level's subject in psp_disagreements is
//     "<payout id>/connected_payout", so one kind on both levels is two
//     disagreements.
//     What may still be in flight (an outcome webhook on its way, a posting
//     queued) is given PSP_RECONCILE_GRACE before it is a disagreement; a
//     contradiction between two final states is one at once.
//   - Compares the PSP's balance with its clearing account (balance.go),
//     last, so that the events it recovered count as in flight: Stripe's
//     platform balance (GET /v1/balance, available plus pending) and
//     Paystack's (GET /balance), per currency, against
//     system/psp_clearing:<provider> (what the ledger says the PSP holds:
//     minus the sum of its entries, read through ledger_entries_for_api and
//     wallets_for_api, which webhook-api may read already).
//
// Why the balance is compared by how its difference moves. The PSP's
// balance also holds money Aegis never saw: the platform's opening balance,
// and whatever else the account is used for. A configured opening balance
// would be one more number per provider and currency to keep right by hand,
// wrong from the first top-up or withdrawal made outside Aegis. So the
// first run takes the difference (PSP minus ledger) as it finds it, and
// every run after checks that the difference moved only by what is in
// flight: a payout held and not final (the PSP may have paid it out while
// the clearing account waits for its settle posting: the difference may be
// lower by up to their sum) and a payment stored and not credited yet (it
// may be higher by up to theirs). Each run thus knows the settled
// difference lies between two bounds, the intersection of every run's
// since the baseline, stored in the run's report (ProviderReport.Balance)
// for the next run; no table is needed. A run whose bounds miss the
// previous ones by more than the tolerance (PSP_RECONCILE_BALANCE_TOLERANCE,
// DefaultBalanceTolerance) stores a balance_mismatch naming the amount, the
// balances and what was in flight, and its own bounds become the baseline:
// an unexplained move pages once (and the next run clears it) rather than on
// every run for ever, which a deposit made outside Aegis would otherwise do.
// Not allowed for: Stripe's fees until payout-worker's fee collector has
// posted them (PSP_FEE_INTERVAL; the tolerance must cover them), refunds and
// lost disputes between the PSP's debit and their posting.
//
// The job never moves money itself and never decides an outcome: a
// recovered event is evidence the payout worker checks like any webhook
// (its ledger keys and the payout state machine make it apply once), and a
// disagreement is stored for a person (dlq-admin raises a critical alert,
// key "psp_reconciliation").
//
// No signature check. A webhook is signed because anyone can POST to our
// endpoint; a pulled event is the body of our own authenticated HTTPS
// request to the PSP's API (our secret key, the PSP's TLS certificate), so
// the channel authenticates it and there is no signature to check (Stripe
// signs deliveries, not API answers; Paystack likewise).
//
// Runs are River jobs, the suite's one background-job mechanism
// (docs/design/architecture.md, "Background jobs"). A run is two rows written in one transaction: its
// record in psp_reconciliation_runs (the operator's view: status, trigger,
// window, counts, disagreements; dlq-admin alerts from it) and its River
// job (jobs.PSPReconcileArgs in pkg/jobs, queue "psp_reconcile"), which is
// the lease, the retries and the rescue. dlq-admin's POST
// /v1/psp-reconciliation records the run through request_psp_reconciliation_run
// and inserts its job with an insert-only River client; the
// schedule is a jobs.Schedule (Schedule, every PSP_RECONCILE_INTERVAL,
// unique per period) that every replica inserts, so N replicas request one
// run per interval whichever River client of the schema leads (dlq-admin's
// shares the schema; River's own periodic jobs run only on the leader's
// client); its worker records
// the run and queues its job. The record's partial unique index still
// admits one run requested or running: the API's 409, and a scheduled
// request while a run is active is skipped (that run is the period's).
// NewRunner builds webhook-api's River client (pkg/jobs) with both workers.
//
// Why it is safe when River works a run twice. Worker.Work marks the run
// running under a fencing token (River's job id and attempt, and a random
// suffix) in locked_by, and stores the report only while the token holds
// the run (Finish; ErrNotHeld otherwise). A crashed worker's job is rescued
// once the kind's timeout (DefaultRescueAfter, PSP_RECONCILE_RUN_TIMEOUT)
// has passed since it started, by whichever service's River client leads
// (pkg/jobs.Kinds), and retried: the new attempt
// takes the run over with its token. Whatever the earlier attempt did
// before it stopped, or does if it was alive after all, is harmless twice:
// a recovered event is stored through the webhook path, deduplicated by
// the PSP's event id (the second store is a duplicate, no second outbox
// row); the cursor only moves forward (greatest); the disagreements'
// lifecycle is written with the report, under the token, once. Shutdown
// cancels the run, hands it back (requested) and snoozes the job for the
// next client without spending an attempt. A failure at a PSP finishes the
// run as failed (dlq-admin alerts; the next run reads the window again); an
// error storing the report is retried by River. A run whose job is gone
// (discarded after its last attempt) is ended as failed by the next
// scheduled request, so it never blocks the runs after it.
package pspsync
