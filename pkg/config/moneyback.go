package config

import "time"

// A refund or dispute can reach the payout worker before the credit of the
// payment it takes money back from: the payment's webhook was lost and the
// PSP reconciliation (webhook-api, every PSP_RECONCILE_INTERVAL) recovers
// it later, or the credit is still in flight. The worker then waits for the
// credit (MONEY_BACK_CREDIT_WAIT) before it dead-letters the refund and an
// operator is paged. A wait shorter than the reconciliation's worst case
// ends every such refund in a dead letter and a page although the suite
// would have recovered the payment by itself: the wait must outlast what it
// waits for. The rule lives here so that each service reading both
// variables applies the same one (payout-worker, which waits, and
// webhook-api, which reconciles); the deploy manifests set
// PSP_RECONCILE_INTERVAL and PSP_RECONCILE_RUN_TIMEOUT once, in the
// configuration every service reads.
//
// Why a longer wait and not a targeted reconciliation of the one payment:
// a refund waiting longer moves no money (its payment is not credited, so
// there is nothing for the user to spend meanwhile), the wait is a delayed
// outbox row per backoff step, and the reconciliation already reads every
// PSP event since its cursor; a run triggered per waiting refund would add
// a second path into webhook-api's runs (its one-run-at-a-time rule would
// refuse most of them) for a case the schedule covers.

const (
	// PSPReconcileIntervalDefault is PSP_RECONCILE_INTERVAL's default.
	PSPReconcileIntervalDefault = 15 * time.Minute
	// PSPReconcileRunLimit is PSP_RECONCILE_RUN_TIMEOUT's default: the
	// longest one PSP reconciliation run may take, its River job's timeout
	// and rescue delay (webhook-api's pspsync.DefaultRescueAfter is this
	// value).
	PSPReconcileRunLimit = 30 * time.Minute
	// CreditPropagation bounds how long a recovered payment takes from
	// webhook-api's store to the worker's credit (outbox, relay, Kafka,
	// the credit's group commit): seconds normally, a minute with the
	// relay's backoff.
	CreditPropagation = time.Minute
	// MoneyBackCreditWaitOnDemand is MONEY_BACK_CREDIT_WAIT's default when
	// the reconciliation runs only on request (PSP_RECONCILE_INTERVAL=0):
	// then nothing recovers a lost payment by itself, the wait covers a
	// credit in flight only, and the dead letter is what tells an operator
	// to request a run and replay it.
	MoneyBackCreditWaitOnDemand = 30 * time.Second
)

// MinMoneyBackCreditWait is the shortest MONEY_BACK_CREDIT_WAIT that agrees
// with a reconciliation every interval whose runs take at most runTimeout:
// a payment whose webhook was lost just before the refund arrived is read
// by the next run, at most interval later; that run ends within runTimeout
// and its credit arrives within CreditPropagation. With interval 0 (on
// request only) there is no such bound and it returns 0.
func MinMoneyBackCreditWait(interval, runTimeout time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	return interval + runTimeout + CreditPropagation
}

// MoneyBackTiming is the reconciliation's schedule and the credit wait that
// must agree with it.
type MoneyBackTiming struct {
	// ReconcileInterval is PSP_RECONCILE_INTERVAL (0: on request only).
	ReconcileInterval time.Duration
	// ReconcileRunTimeout is PSP_RECONCILE_RUN_TIMEOUT: one run's limit.
	ReconcileRunTimeout time.Duration
	// CreditWait is MONEY_BACK_CREDIT_WAIT.
	CreditWait time.Duration
}

// MoneyBackTiming reads PSP_RECONCILE_INTERVAL, PSP_RECONCILE_RUN_TIMEOUT
// (PSPReconcileRunTimeout) and MONEY_BACK_CREDIT_WAIT and holds them to the rule above: unset, the
// wait is MinMoneyBackCreditWait (MoneyBackCreditWaitOnDemand without a
// schedule); set shorter than that, it is refused, naming the variables.
// Set the first two once for every service (the manifests' aegis-config).
//
//	PSP_RECONCILE_INTERVAL     how often the PSP reconciliation runs (a River job every webhook-api replica
//	                           inserts at each period's start, UTC multiples of the interval, and at start:
//	                           one run per period however many replicas);
//	                           0: only when requested (POST /v1/psp-reconciliation on dlq-admin)
//	MONEY_BACK_CREDIT_WAIT     how long a refund or dispute that arrives before its payment's credit is
//	                           published again, delayed, waiting for the credit before it is dead-lettered;
//	                           unset: PSP_RECONCILE_INTERVAL + PSP_RECONCILE_RUN_TIMEOUT + 1m (46m with the
//	                           defaults; 30s with the schedule off), and a shorter value is refused at start
func (e *Env) MoneyBackTiming() MoneyBackTiming {
	t := MoneyBackTiming{
		ReconcileInterval:   e.Duration("PSP_RECONCILE_INTERVAL", PSPReconcileIntervalDefault),
		ReconcileRunTimeout: e.PSPReconcileRunTimeout(),
	}
	if t.ReconcileInterval < 0 {
		e.Errorf("PSP_RECONCILE_INTERVAL must not be negative (0 turns the schedule off)")
		t.ReconcileInterval = 0
	}
	if t.ReconcileInterval > 0 && t.ReconcileInterval < time.Second {
		// The schedule's job is unique per period (pkg/jobs.Schedule):
		// River's least period is a second.
		e.Errorf("PSP_RECONCILE_INTERVAL must be 0 (no schedule) or at least 1s")
		t.ReconcileInterval = PSPReconcileIntervalDefault
	}
	floor := MinMoneyBackCreditWait(t.ReconcileInterval, t.ReconcileRunTimeout)
	def := floor
	if def == 0 {
		def = MoneyBackCreditWaitOnDemand
	}
	t.CreditWait = e.Duration("MONEY_BACK_CREDIT_WAIT", def)
	switch {
	case t.CreditWait < 0:
		e.Errorf("MONEY_BACK_CREDIT_WAIT must not be negative")
	case t.CreditWait < floor:
		e.Errorf("MONEY_BACK_CREDIT_WAIT %s is shorter than PSP_RECONCILE_INTERVAL %s plus PSP_RECONCILE_RUN_TIMEOUT %s "+
			"and the recovered credit (%s): a refund of a payment the reconciliation recovers would be dead-lettered first; "+
			"set it to at least %s, or unset it", t.CreditWait, t.ReconcileInterval, t.ReconcileRunTimeout, CreditPropagation, floor)
	}
	return t
}

// PSPReconcileRunTimeout reads PSP_RECONCILE_RUN_TIMEOUT: the timeout of a
// PSP reconciliation run's River job. webhook-api works the runs; dlq-admin
// reads it too, because River's rescuer runs on whichever service's client
// leads the shared River schema and judges a run by this timeout
// (pkg/jobs.Kinds): set it once for every service.
//
//	PSP_RECONCILE_RUN_TIMEOUT  the longest one reconciliation run may take; a run still going then is
//	                           cancelled, and a run whose replica died is handed to another replica once
//	                           this long has passed since it started (River's job timeout and rescue delay,
//	                           applied by whichever service's River client leads: set it once, for every
//	                           service)
func (e *Env) PSPReconcileRunTimeout() time.Duration {
	d := e.Duration("PSP_RECONCILE_RUN_TIMEOUT", PSPReconcileRunLimit)
	if d < time.Second {
		e.Errorf("PSP_RECONCILE_RUN_TIMEOUT must be at least 1s")
		return PSPReconcileRunLimit
	}
	return d
}
