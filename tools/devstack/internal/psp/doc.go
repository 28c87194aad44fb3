// Package psp is a local stand-in for the payment service providers Aegis
// pays out through: a Stripe- and Paystack-compatible HTTP server used by
// `make dev` and by the reliability/chaos tests instead of the real PSPs.
//
// # Why it exists
//
// The payout worker moves money through Stripe (stripe-go v76 payout.New and
// transfer.New with an Idempotency-Key, backend URL pointed here) and
// Paystack (plain JSON, reference as idempotency key). Whether Aegis ever
// pays twice depends on how the PSP treats retries, so the stand-in
// reproduces the PSPs' idempotency contract faithfully, lets tests switch
// infrastructure and business faults on at run time, and records every call
// and every created object so a test can assert "the PSP recorded at most
// one successful payout per payout id".
//
// # Routes
//
// Stripe (form-encoded as stripe-go sends it, Authorization: Bearer sk_/rk_;
// Stripe-Account: acct_… acts for a connected account):
//
//	POST /v1/payouts          GET /v1/payouts/{id}     GET /v1/payouts (list)
//	POST /v1/transfers        GET /v1/transfers/{id}   GET /v1/transfers (list)
//	POST /v1/transfers/{id}   description, metadata: transfer.updated
//	POST /v1/transfers/{id}/reversals                 amount (default: the rest), metadata
//	GET  /v1/transfers/{id}/reversals (list)          GET /v1/transfers/{id}/reversals/{id}
//	GET  /v1/accounts/{id}    GET /v1/accounts/{id}/external_accounts/{ba_… or card_…}
//	GET  /v1/balance          the platform's, or the connected account's
//	GET  /v1/balance_transactions (list)              GET /v1/balance_transactions/{id}
//	GET  /v1/charges/{id}     a payment's charge (balance_transaction, refunds)
//	GET  /v1/events (list)    GET /v1/events/{id}      every event created, sent or not
//
// Paystack (JSON, Authorization: Bearer sk_):
//
//	POST /transfer            GET /transfer/verify/{reference}
//	POST /transfer/finalize_transfer                  {transfer_code, otp}
//	GET  /transfer/{id_or_code}
//	GET  /transfer (list)     GET /transaction (list)  GET /transaction/verify/{reference}
//	GET  /transferrecipient/{id_or_code}              GET /balance
//
// The lists are the PSP's own record (events.go), which the PSP
// reconciliation reads to recover what a dropped webhook never said.
//
// Admin (no auth; loopback dev tool):
//
//	GET|PUT|DELETE /_psp/faults        fault configuration (FaultSpec)
//	GET  /_psp/objects[?provider=&kind=&payout_id=]
//	GET  /_psp/objects/{id}
//	POST /_psp/objects/{id}/settle     {"outcome":"paid"|"failed","failure_code":".."}
//	POST /_psp/objects/{id}/reverse    {"amount":0=rest}: reverse a Stripe transfer as
//	                                   the platform or Stripe would (not refused for the
//	                                   destination's balance); sends transfer.reversed
//	POST /_psp/payments                {"provider","user_id","amount","currency"}: a customer
//	                                   pays; sends payment_intent.succeeded (Stripe) /
//	                                   charge.success (Paystack); answers the payment with
//	                                   its charge (ch_… / transaction id) and the PSP's fee
//	GET  /_psp/payments/{id}           the payment with its refunds and disputes
//	POST /_psp/payments/{id}/refunds   {"amount":0=rest,"outcome":"succeeded"|"failed"}
//	POST /_psp/payments/{id}/disputes  {"amount":0=rest,"outcome":"won"|"lost"|""=open}
//	POST /_psp/disputes/{id}/close     {"outcome":"won"|"lost"}
//	GET  /_psp/calls                   every PSP request, arrival order
//	GET  /_psp/webhooks                every webhook delivery
//	DELETE /_psp/state                 wipe everything (and faults), re-seed
//	GET  /healthz
//
// # Environment (ConfigFromEnv; only cmd/aegis-psp reads the environment)
//
// The stand-in's secrets are its own variables, never the services'
// (STRIPE_WEBHOOK_SECRET, PAYSTACK_SECRET_KEY): a stand-in is not handed
// production secrets by sharing an environment. It refuses to start when
// one of its secrets, or one of the services' PSP secrets present in its
// environment, looks live (sk_live_, rk_live_, pk_live_), and answers 401
// to a request made with a live key.
//
//	PSP_ADDR                  listen address (default 127.0.0.1:12111)
//	PSP_SEED                  int64 seed of the fault source (default: time-based)
//	PSP_FAULTS                initial FaultSpec JSON (same as PUT /_psp/faults)
//	PSP_STRIPE_WEBHOOK_URL    where Stripe events go (none if empty)
//	PSP_STRIPE_WEBHOOK_SECRET signing secret; if comma-separated, the first signs
//	PSP_PAYSTACK_WEBHOOK_URL  where Paystack events go (none if empty)
//	PSP_PAYSTACK_SECRET_KEY   HMAC-SHA512 key for x-paystack-signature
//	PSP_SETTLE_DELAY          auto-settle delay (default 2s; 0 = only via /settle)
//	PSP_WEBHOOK_MAX_ATTEMPTS  delivery attempts per event (default 5)
//	PSP_WEBHOOK_BACKOFF       delay before the 2nd attempt, doubled after (default 1s)
//	PSP_IDEMPOTENCY_WINDOW    how long Stripe keys are kept (default 24h)
//	PSP_BALANCES              starting balances of the Stripe platform and the Paystack
//	                          integration, "usd=100000,ngn=5000" in minor units (default
//	                          10^12 in usd, eur, gbp, ngn for Stripe; ngn, usd, ghs, zar,
//	                          kes for Paystack)
//
// # Faithful to the real PSPs
//
//   - Stripe idempotency: keys are scoped per API key (and Stripe-Account);
//     the first request with a key that reaches execution stores its status
//     and body; later requests with the same key and identical parameters
//     (method, path and the full form) get that response replayed byte for
//     byte with Idempotent-Replayed: true and Original-Request, creating
//     nothing; different parameters give 400 idempotency_error; a key whose
//     first request is still executing gives 409 idempotency_key_in_use.
//     Validation errors and business rejections executed, so they are
//     stored too. Replays return the response as it was, not the object's
//     current state (GET does that).
//   - Paystack references: one transfer per reference (per secret key);
//     the same reference with the same parameters returns that transfer
//     (current state, nothing new); different parameters give 400
//     "Duplicate Transfer Reference". A reference whose create was rejected
//     is not taken.
//   - A Stripe 5xx is saved under its Idempotency-Key and replayed for every
//     retry with that key, as Stripe does once execution has begun (its
//     idempotency documentation: "results are saved ... including 500
//     errors"): a caller must look the object up and retry under a new key.
//     Keys are pruned after PSP_IDEMPOTENCY_WINDOW (Stripe: 24h).
//   - Events: GET /v1/events lists every event the stand-in created,
//     including those whose webhook was dropped or failed, newest first,
//     with limit, starting_after / ending_before, created[...] and
//     type / types[] (stripe-go's event.List pages through it).
//     Paystack has no events API; its lists (GET /transaction,
//     GET /transfer) page with perPage/page and filter with from/to.
//   - Lists: GET /v1/payouts and /v1/transfers, newest first, with limit,
//     starting_after, created[gte|gt|lte|lt], destination and (transfers)
//     transfer_group; Stripe cannot filter by metadata, so callers match
//     metadata[payout_id] themselves.
//   - Other infrastructure faults (429 with Retry-After, timeout before
//     processing) and Paystack 5xx model a request that never reached
//     execution, so they are never stored: a retry with the same key
//     executes normally.
//     timeout_after_create executes and stores the create, then hangs and
//     answers 504: the classic unknown outcome, resolved by retrying with
//     the same key (which replays) or by GET.
//     error_after_create executes and stores the create, then answers
//     the fault's error_status (503 in the chaos week profile), saved under
//     the key like any Stripe 5xx: a server error for a request that moved
//     money. Stripe documents no 5xx as "not executed".
//     pending_for keeps every payout or transfer created while it is set
//     pending that long (a payout the bank takes days over); otp_for
//     creates Paystack transfers in status "otp" (Paystack: the transfer
//     waits for the OTP sent to the business, completed by
//     POST /transfer/finalize_transfer) and completes them after it.
//     slow_create claims the key and executes the create only after the
//     fault timeout, whether or not the caller still waits: a caller that
//     gave up sees an unknown outcome, a lookup meanwhile finds nothing,
//     and the object appears afterwards (the race a caller's settle
//     window exists for).
//   - Payouts are created "pending" and later become "paid" or "failed"
//     (failure_code, failure_message), announced by signed webhooks
//     (Stripe-Signature t=..,v1=HMAC-SHA256 over "t.body";
//     x-paystack-signature HMAC-SHA512 over the body), retried with
//     exponential backoff on non-2xx or connection errors.
//   - Stripe Connect (connect.go): GET /v1/accounts/{id} and its external
//     accounts in Stripe's shapes; every acct_ id exists (express, US, usd,
//     payouts enabled, transfers active) and each ba_/card_ id is one of
//     its external accounts. A request with Stripe-Account acts for that
//     account: its payouts are its own (GET and lists without its header
//     do not show them, nor do they show the platform's to it), and their
//     events carry "account": "acct_…" at the event's top level, in the
//     webhook and in that account's GET /v1/events (the platform's list
//     shows its own events only). Idempotency keys are scoped per API key
//     and Stripe-Account.
//   - Balances (balance.go): a transfer moves its amount from the platform
//     (or, under Stripe-Account, a connected account) to its destination
//     when it is created, refused with balance_insufficient beyond the
//     balance; a payout on a connected account takes its amount from the
//     account's balance (refused beyond it), and a failed one gives it
//     back. A payment adds its amount less the PSP's fee to the
//     platform's (Stripe) or integration's (Paystack) balance; a refund
//     takes its amount back (the fee is not returned), and a Stripe refund
//     that fails gives it back. GET /v1/balance answers Stripe's balance
//     object. A Paystack transfer takes its amount from the integration's
//     balance ("Your balance is not enough…" beyond it) and a failed one
//     gives it back; GET /balance lists them per currency.
//   - Fees (fees.go): Stripe charges its standard US card pricing, 2.9% +
//     30 minor units (Config.StripeCardFee), rounded to the nearest unit
//     with a half rounded up, as Stripe rounds its fees. Paystack charges
//     its Nigerian local card pricing: 1.5% + ₦100, the ₦100 waived below
//     ₦2,500, capped at ₦2,000; GHS 1.95%, KES 2.9%, ZAR 2.9% + R1, USD
//     and any other currency 3.9%. The customer's payment is still its
//     full amount (payment_intent.succeeded amount and amount_received,
//     charge.success amount): the fee is the platform's cost, reported
//     apart. Paystack reports it as the transaction's fees (kobo) in
//     charge.success, GET /transaction and GET /transaction/verify.
//   - Stripe balance transactions (balancetxn.go): every movement of a
//     Stripe balance above is posted on that balance as a
//     balance_transaction, and the balance moves by its net: charge
//     (amount, fee with fee_details [{type stripe_fee}], net = amount -
//     fee, source the charge), refund, adjustment (a failed refund,
//     reporting_category refund_failure), transfer and, on the
//     destination, payment; transfer_refund and payment_refund for a
//     reversal; payout and payout_failure on a connected account. The
//     charge (GET /v1/charges/{id}), refund (in its events), transfer,
//     reversal and connected payout carry the id as balance_transaction
//     (a failed refund or connected payout also as
//     failure_balance_transaction), unexpanded as Stripe sends it.
//     GET /v1/balance_transactions lists an account's newest first with
//     limit, starting_after / ending_before, created[...], type, source,
//     currency and payout; other parameters are refused. Filtering on a
//     payout is refused: Stripe filters on automatic payouts only, and
//     every payout here is made through the API.
//   - Transfers (transfers.go) have no status in Stripe's API: created,
//     the money has moved. POST /v1/transfers/{id}/reversals reverses part
//     or all of what is left (more is refused, and so is more than the
//     destination holds), moving it back and updating amount_reversed,
//     reversed (true once all is reversed) and the reversals list; each
//     reversal, partial or not, sends transfer.reversed. transfer.created
//     is sent on creation and transfer.updated on a description or
//     metadata change, as Stripe sends them.
//   - Paystack recipients (recipients.go): GET /transferrecipient answers
//     the recipient (type nuban, active, details with account number, bank
//     code and name) for any RCP_ code, and by the id it was given.
//   - POST /transfer/finalize_transfer (finalize.go) completes a transfer
//     in status "otp" with the OTP 123456: it becomes "pending" and settles
//     after the settle delay. A wrong OTP, or a transfer not waiting for
//     one, is refused and changes nothing.
//
// # Simplified
//
//   - Nothing is persisted.
//   - Only the parameters listed in the routes are accepted; unknown Stripe
//     parameters are rejected (parameter_unknown) as Stripe does, but the
//     validation messages are approximations of Stripe's, and Paystack's
//     error texts (other than those in its published error list) are
//     guesses.
//   - Platform payouts (no Stripe-Account) are paid from an unlimited
//     balance: they neither check nor change the platform's balance, so
//     they post no balance transaction (their balance_transaction and
//     failure_balance_transaction ids do not resolve). Disputes move no
//     balance either, for either PSP, and Stripe's dispute fee is not
//     charged. Balances are not scoped per API key, have no pending part
//     (all is available at once: balance transactions are "available"
//     with available_on = created) and no currency conversion; connected
//     accounts start empty.
//   - Fees: one rate per PSP and currency, whatever the card: Stripe's
//     US pricing is applied to every currency as is (no conversion or
//     international card fee, and no minimum charge amount, so a tiny
//     payment can net below zero); Paystack's rates are applied to every
//     currency of the one integration, VAT not added, and its rounding
//     (to the nearest kobo, a half up) is a guess. The fees are fixed at
//     payment time; a refund returns no fee (for Paystack, a guess).
//   - Stripe's charge.succeeded is not sent (only payment_intent.succeeded,
//     whose latest_charge names the charge). GET /v1/charges/{id} renders
//     the charge with fixed card details. The refusal of the payout filter
//     and of an unknown type are worded as guesses at Stripe's texts.
//   - Objects are not scoped per API key for Stripe GETs (only per
//     Stripe-Account); Paystack lookups are scoped per secret key.
//   - The stand-in's record (GET /_psp/objects, not the API) still shows
//     transfers pending→paid|failed; one that settles failed (acct_fail*,
//     or the settle admin route) is reversed for what is left of it, as if
//     Stripe took the money back, which sends transfer.reversed. Payouts
//     send only payout.paid / payout.failed (no cancel).
//   - Connected accounts cannot be created, updated or deleted, and their
//     external accounts are fixed: a usd bank account or debit card in the
//     US. One webhook URL receives platform and Connect events alike.
//   - Paystack recipients cannot be created; their account numbers are
//     derived from the code. finalize_transfer's refusals ("Invalid OTP",
//     "Transfer is not currently awaiting OTP") are guesses at Paystack's
//     texts.
//   - Magic values: Stripe destination ba_invalid*/acct_invalid* →
//     account_invalid; ba_fail* (payout) / acct_fail* (transfer) → settles
//     failed with account_closed; ba_lost_* → the first create for a
//     payout id executes but its answer is lost (a 504 after the timeout),
//     ba_lost_invalid* being refused with account_invalid, ba_lost_ok* paid
//     as usual: an unknown outcome the caller must resolve by a lookup.
//     Connect: acct_missing* → no such account (404 on GET, 403 as
//     Stripe-Account, resource_missing as a transfer's destination);
//     acct_nopayouts* → payouts_enabled false, its payouts refused
//     (payouts_not_allowed); acct_notransfers* → capabilities.transfers
//     "inactive", transfers to it refused
//     (insufficient_capabilities_for_transfer); ba_other*/card_other* → not
//     the account's (404 on GET, resource_missing as a payout's
//     destination). Paystack recipient RCP_invalid* → Invalid transfer
//     recipient; RCP_fail* → transfer.failed; RCP_missing* → no such
//     recipient (404); RCP_usd* → a USD recipient (any other RCP_: NGN).
//   - Faults apply to money-moving POSTs only (payouts, transfers,
//     reversals, Paystack transfers and finalize_transfer; not
//     POST /v1/transfers/{id}), latency to every PSP route.
//     The Next queue is consumed head first: an infrastructure kind at the
//     head is taken by the next create that arrives; an execution kind
//     (invalid_account, insufficient_funds, timeout_after_create) by the
//     next create that passes validation and actually executes (replays do
//     not consume it). Rates are drawn from one math/rand/v2 PCG source
//     seeded by Config.Seed, so a seeded server makes the same decisions for
//     the same sequence of requests.
//
// Handler alone serves requests; Run is needed for auto-settlement and
// webhook delivery, and releases hanging fault requests when it stops.
package psp
