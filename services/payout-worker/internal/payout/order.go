package payout

// What order a user's records are promised, and why a scheduled retry is
// outside it.
//
// A user's credits, payout commands, operator resolutions and the outcome
// events on aegis.settlements are keyed by the user id: the outbox hands
// out a key's rows in commit order and never past one that is unfinished
// or not yet due, Kafka keeps a key on one partition of a topic, and the
// consumer handles a key's records one at a time, in the order polled,
// across topics too. Within a topic they are applied in the order they were
// accepted. Across the two topics (credits on aegis.webhook.pending, payout
// commands on aegis.transactions) the order polled is not the order
// accepted when a fetch or a rewind brings the later record first. That
// order matters because a payout spends credits: a payout accepted right
// after a credit was acknowledged, before the credit was applied, can find
// the wallet short and end FINALIZED "insufficient funds in the wallet",
// visibly and with nothing moved (a refund or dispute that comes before its
// credit waits for it: MONEY_BACK_CREDIT_WAIT).
//
// A payout's scheduled retry (every delayed attempt: backoff, the settle
// window, an open breaker, a PSP's Retry-After) is keyed by its payout
// instead (RetryKey), so that its not-yet-due row holds back none of the
// user's rows: with the user's key, every later credit, payout and
// settlement event of that user would wait for the retry's delay. Nothing
// needs the retry ordered with them:
//   - The money is held at the payout's first attempt (INITIALIZED →
//     SENDING_TO_GATEWAY, in the transaction that posts the hold); a retry
//     only calls the PSP and records the answer. A later credit cannot make
//     it pay more, and a later payout's hold does not depend on it.
//   - Work on the wallet is serialised whatever partition a record comes
//     from: the wallet lock (walletlock, on the user id from the payload),
//     and in the ledger transaction the wallet's row lock and balance
//     check.
//   - Against the other commands and events of the same payout (its
//     outcome webhooks, an operator's resolution or replay) the payout
//     row's state, read under its row lock, and processed_events decide:
//     a retry that finds the payout sent or finished is a stale command
//     and changes nothing, so does one that finds it in NEEDS_REVIEW
//     unless it is an operator's replay (event.IsReplayID: only a person
//     resumes a parked payout, and it is looked up first), and a
//     webhook that settles a payout waiting for its retry is applied as it
//     would be at any time.
//     There is one retry per payout at a time: each is written by the
//     handling of the previous attempt, in the transaction that moves the
//     payout to RETRYING.
//
// The cost: a retry and a payout command of the same wallet (a new payout,
// a resolution) may now be handled at once by two of the worker's slots,
// as they could by two replicas; the later one waits for the wallet lock
// (WALLET_LOCK_WAIT) while the retry calls the PSP, and a payout command
// still without it is deferred through the outbox (processor.go,
// deferBusy), never dead-lettered for waiting. Credits take no wallet lock.
//
// The sweeper's re-publication of a lost INITIALIZED payout's command is
// not a retry: it takes the hold, so it is written on the user's key like
// the command it replaces, behind the credits accepted before it.
//
// The retry's dead letter is still filed under the user (it carries the
// user in kafkax.HeaderUserKey; kafkax.LetterKey), so dead letters list by
// user as before, and a replay of it is keyed by the user.
//
// The key is distinct from "payout:<id>", the key of a PSP outcome event
// that names no user (webhook-api): with that key a retry not yet due
// would hold back the outcome of its own payout.
//
// Rolling upgrade: retries written on the user's key before this one and
// still waiting are moved to their payout's key by migration 000026 (the
// user kept in the header). One a worker of the previous release writes
// during the rollout holds its user's rows back until it is due, as it
// always did: at most its own delay. A worker of either release handles a
// retry of either key the same way: it reads the payout from the payload,
// never from the key.

// retryKeyPrefix prefixes a payout id into its retries' partition key.
const retryKeyPrefix = "payout-retry:"

// RetryKey is the outbox partition key (and Kafka key) of the scheduled
// retries of payout id.
func RetryKey(payoutID string) string { return retryKeyPrefix + payoutID }
