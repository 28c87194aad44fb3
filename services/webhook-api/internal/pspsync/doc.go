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
// reads them and alerts on their disagreements.
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
//   - Puts every event not stored yet through the webhook path. An event
//     stored already (its webhook came) is counted present; one whose
//     webhook arrives after recovery is answered duplicate. One event that
//     cannot be normalised is reported and skipped: it never stops the
//     others.
//   - Moves the cursor to the run's start, only when the events were read
//     and stored in full: a failed run is read again by the next.
//   - Compares payouts: the PSP's payouts/transfers (by metadata[payout_id]
//     or reference) against ours, and our SUCCEEDED payouts against the PSP
//     (looked up by id when the listing did not show them); and stored
//     refund/dispute events against their ledger posting (payment_returns).
//     What may still be in flight (an outcome webhook on its way, a posting
//     queued) is given PSP_RECONCILE_GRACE before it is a disagreement; a
//     contradiction between two final states is one at once.
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
// One mechanism for runs. Issue 12 prefers River for background jobs. This
// job uses a run-request table (psp_reconciliation_runs) with a partial
// unique index (one run requested or running: the API's 409 and the
// schedule's uniqueness), a lease renewed while the run works (a dead
// worker's run is taken over) and a schedule request inserted by whichever
// replica's tick comes first. River was not adopted here: it is not yet a
// dependency of any module, adopting it means applying its migrations in
// the migrate command and pkg/pgtest and moving dlq-admin's existing jobs
// (which this change must not touch), and a single job kind did not
// justify a second job system beside replay_jobs in the time given. The
// table's columns (status, attempts, locked_by, lease) map onto River's
// job row if it is adopted for every job later (docs/reconciliation.md).
package pspsync
