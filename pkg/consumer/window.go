package consumer

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A window is one stretch of consuming between two points where a rebalance
// may happen. Within it the loop keeps polling while records are in flight:
// a record that arrives is queued behind the records of its key (PerKey) or
// partition (PerPartition) still in flight and starts as soon as they are
// done and a slot is free, instead of waiting for the slowest record of the
// batch before it. Offsets are committed as each partition's done prefix
// grows. The window ends when nothing is in flight, when it has lasted
// Config.Window (a rebalance the group asked for waits at most that long
// plus the records in flight), when a record is left undone, or when the
// loop stops; then every record in flight finishes (within Grace on
// shutdown), the done prefixes are committed, undone partitions are
// rewound, and the rebalance is allowed.
type window struct {
	c     *Consumer
	work  context.Context // outlives the stop signal by Grace
	slots chan struct{}
	// closed is closed when the window ends with Config.LeaveQueued: no
	// queued record starts after it (nil: never).
	closed chan struct{}

	mu       sync.Mutex
	parts    map[topicPartition]*partition
	keys     map[partitionKey]*keyQueue
	inFlight int  // dispatched records not yet finished or abandoned
	undone   bool // a record was left undone while the worker runs
	changed  chan struct{}
	keyRuns  sync.WaitGroup

	lastCommit time.Time
}

type topicPartition struct {
	topic     string
	partition int32
}

// partitionKey names the records handled one at a time, in the order
// polled: with PerKey, those of one Kafka key whatever their topic and
// partition (a user's credit on aegis.webhook.pending and the payout command
// accepted after it on aegis.transactions share the user's key), and a
// partition's records without a key; with PerPartition, a partition's.
type partitionKey struct {
	topicPartition
	key string
}

func (w *window) queueOf(tp topicPartition, r *kgo.Record) partitionKey {
	if w.c.cfg.Order == PerKey && len(r.Key) > 0 {
		return partitionKey{key: string(r.Key)}
	}
	return partitionKey{topicPartition: tp}
}

// partition is one partition's records of this window from the first one
// not yet committed, in offset order.
type partition struct {
	entries []*entry
	hwm     int64
}

type entry struct {
	rec  *kgo.Record
	done bool
}

// keyQueue is one key's records (PerPartition: the partition's) waiting
// behind the one being handled. A key whose record is left undone is
// stopped: the records behind it stay unhandled until the partition is
// rewound and delivers them again.
type keyQueue struct {
	waiting []*entry
	stopped bool
}

// inFlightPerPoll bounds the records in flight to this many polls' worth:
// enough to keep every slot busy behind a slow record, few enough that a
// window ends promptly.
const inFlightPerPoll = 2

// pollWhileBusy is how long a poll waits for records while others are in
// flight, so that finished records are committed without waiting on Kafka.
const pollWhileBusy = 50 * time.Millisecond

// commitEvery spaces the offset commits made while a window runs.
const commitEvery = 100 * time.Millisecond

// runWindow consumes one window that starts with first.
func (c *Consumer) runWindow(ctx context.Context, first kgo.Fetches) {
	work, cancel := graceContext(ctx, c.cfg.Grace)
	defer cancel()
	w := &window{c: c, work: work, slots: make(chan struct{}, c.cfg.Concurrency),
		parts: map[topicPartition]*partition{}, keys: map[partitionKey]*keyQueue{},
		changed: make(chan struct{}, 1), lastCommit: time.Now()}
	if c.cfg.LeaveQueued {
		w.closed = make(chan struct{})
	}
	w.dispatch(first)
	end := time.Now().Add(c.cfg.Window)
	for ctx.Err() == nil && time.Now().Before(end) {
		inFlight, undone := w.state()
		if inFlight == 0 || undone {
			break
		}
		if inFlight >= inFlightPerPoll*c.cfg.MaxPollRecords {
			w.waitChange(ctx, pollWhileBusy)
		} else {
			pollCtx, cancelPoll := context.WithTimeout(ctx, pollWhileBusy)
			fetches := c.cl.PollRecords(pollCtx, c.cfg.MaxPollRecords)
			cancelPoll()
			if fetches.IsClientClosed() {
				break
			}
			c.logFetchErrors(fetches)
			w.dispatch(fetches)
		}
		if time.Since(w.lastCommit) >= commitEvery {
			w.commit(ctx)
		}
	}
	if c.cfg.LeaveQueued {
		close(w.closed)
	}
	w.keyRuns.Wait()
	w.commit(ctx)
	if ctx.Err() == nil {
		c.rewind(w.firstUndone())
	}
}

func (w *window) state() (inFlight int, undone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight, w.undone
}

// waitChange waits until a record finishes, ctx ends or d passes.
func (w *window) waitChange(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.changed:
	case <-ctx.Done():
	case <-t.C:
	}
}

// dispatch queues each record behind its key's (PerPartition: its
// partition's) and starts a run for each that has none.
func (w *window) dispatch(fetches kgo.Fetches) {
	var queued []*kgo.Record
	defer func() {
		for _, r := range queued {
			w.c.cfg.OnQueued(r)
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		tp := topicPartition{p.Topic, p.Partition}
		part := w.parts[tp]
		if part == nil {
			part = &partition{}
			w.parts[tp] = part
		}
		part.hwm = p.HighWatermark
		for _, r := range p.Records {
			e := &entry{rec: r}
			part.entries = append(part.entries, e)
			k := w.queueOf(tp, r)
			q := w.keys[k]
			switch {
			case q != nil && q.stopped:
				continue // left for the rewind
			case q != nil:
				q.waiting = append(q.waiting, e)
				if w.c.cfg.OnQueued != nil {
					queued = append(queued, r)
				}
			default:
				q = &keyQueue{waiting: []*entry{e}}
				w.keys[k] = q
				w.keyRuns.Add(1)
				go w.runKey(k, q)
			}
			w.inFlight++
		}
	})
}

// runKey handles one key's records in order while any are queued, holding
// one slot. A run that got a slot handles its first record even when the
// window closed meanwhile (LeaveQueued): otherwise a window shorter than
// the time a run takes to start would start nothing, and its partitions
// would be rewound and polled again without end.
func (w *window) runKey(k partitionKey, q *keyQueue) {
	defer w.keyRuns.Done()
	if !w.acquire() {
		w.stop(k, q)
		return
	}
	defer func() { <-w.slots }()
	for first := true; ; first = false {
		if !first {
			select {
			case <-w.closed:
				w.stop(k, q)
				return
			default:
			}
		}
		w.mu.Lock()
		if len(q.waiting) == 0 {
			delete(w.keys, k)
			w.mu.Unlock()
			return
		}
		e := q.waiting[0]
		q.waiting = q.waiting[1:]
		w.mu.Unlock()

		ok := w.c.handle(w.work, e.rec)

		w.mu.Lock()
		e.done = ok
		w.inFlight--
		w.mu.Unlock()
		w.signal()
		if !ok {
			w.stop(k, q)
			return
		}
	}
}

// acquire takes a slot for a key run: a free one at once, even after the
// window closed, or else the first to free up while the window is open and
// the work goes on. It reports false when the run must not start.
func (w *window) acquire() bool {
	if w.work.Err() != nil {
		return false
	}
	select {
	case w.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case w.slots <- struct{}{}:
		return true
	case <-w.work.Done():
		return false
	case <-w.closed:
		return false
	}
}

// stop abandons the rest of a key's queue after a record left undone, or
// when the window closed with records queued. The key stays in the window,
// stopped, so that its later records are not handled ahead of the undone
// one; the partition is rewound to its first record not done.
func (w *window) stop(k partitionKey, q *keyQueue) {
	w.mu.Lock()
	w.inFlight -= len(q.waiting)
	q.waiting = nil
	q.stopped = true
	w.undone = true
	w.mu.Unlock()
	w.signal()
}

func (w *window) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// commit commits each partition's done prefix that moved since the last
// commit and drops it from the window.
func (w *window) commit(ctx context.Context) {
	w.lastCommit = time.Now()
	type progress struct {
		last *kgo.Record
		hwm  int64
	}
	var moved []progress
	w.mu.Lock()
	for _, part := range w.parts {
		n := 0
		for n < len(part.entries) && part.entries[n].done {
			n++
		}
		if n == 0 {
			continue
		}
		moved = append(moved, progress{part.entries[n-1].rec, part.hwm})
		part.entries = part.entries[n:]
	}
	w.mu.Unlock()
	if len(moved) == 0 {
		return
	}
	recs := make([]*kgo.Record, len(moved))
	for i, p := range moved {
		recs[i] = p.last
		w.c.metrics.lag.WithLabelValues(p.last.Topic, strconv.Itoa(int(p.last.Partition))).Set(float64(p.hwm - p.last.Offset - 1))
	}
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.c.cfg.CommitTimeout)
	defer cancel()
	if err := w.c.cl.CommitRecords(commitCtx, recs...); err != nil {
		// The effects are committed and idempotent: a redelivery is harmless.
		w.c.logger.Warn("offset commit failed; records will be redelivered and skipped as processed", "group", w.c.cfg.Group,
			"error", err.Error())
		return
	}
	now := float64(time.Now().Unix())
	for _, r := range recs {
		w.c.metrics.progress.WithLabelValues(r.Topic, strconv.Itoa(int(r.Partition))).Set(now)
	}
}

// firstUndone returns each partition's first record not handled, once every
// key run has ended.
func (w *window) firstUndone() []*kgo.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*kgo.Record
	for _, part := range w.parts {
		if len(part.entries) > 0 {
			out = append(out, part.entries[0].rec)
		}
	}
	return out
}
