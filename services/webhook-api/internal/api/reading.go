package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// errReadingFull: the webhook bodies being read and verified already hold
// the memory they may (Reading); answered 503 overloaded with Retry-After.
var errReadingFull = errors.New("too many webhook bodies are being read at once; nothing was stored, retry after the Retry-After delay")

// DefaultReadingMax is WEBHOOK_READING_MAX_MIB's default in bytes: 32 MiB
// of unverified bodies, a eighth of the 256 MiB the manifests give a
// replica (deploy/k8s). Its live heap is then at most a few MiB of its own
// plus these 32 and the commit line's verified bodies; at GOGC 400 the
// heap goal from that stays below the soft limit of 90% of the container's
// (pkg/memlimit), which the collector defends beyond it. 32 MiB is 32
// bodies of the largest size (MaxWebhookBody) or thousands of the few KiB a
// PSP's webhook is, at once.
const DefaultReadingMax = 32 << 20

// firstRead is the buffer a body of unknown length starts with.
const firstRead = 16 << 10

// Reading bounds the memory that webhook bodies hold while they are read
// and verified: before its signature is checked a body is anyone's, and
// each of thousands of slow uploads holding up to MaxWebhookBody would
// otherwise grow the heap until the container is killed. A body's buffer
// is taken from the bound before it is allocated and grows (doubling, up
// to its Content-Length) only as its bytes arrive, so a slow upload holds
// what it sent and not what it declared. When a buffer cannot grow the
// webhook is answered 503 overloaded with Retry-After at once (the PSP
// retries it, as any 5xx), and the connection is closed rather than the
// rest of the body read. A verified body goes on to the commit line, whose
// admission bounds it (ingest.Committer).
type Reading struct {
	max     int64
	held    atomic.Int64
	refused *prometheus.CounterVec
}

// NewReading returns the bound of max bytes and registers its metrics on
// reg: aegis_webhook_reading_bytes (held now), aegis_webhook_reading_max_bytes
// and aegis_webhooks_reading_refused_total by provider.
func NewReading(max int64, reg prometheus.Registerer) *Reading {
	r := &Reading{max: max, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_webhooks_reading_refused_total",
		Help: "Webhooks answered 503 overloaded (with Retry-After) because the bodies being read and verified held WEBHOOK_READING_MAX_MIB, by provider.",
	}, []string{"provider"})}
	reg.MustRegister(r.refused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aegis_webhook_reading_bytes",
			Help: "Bytes of buffers held by webhook bodies being read and verified.",
		}, func() float64 { return float64(r.held.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aegis_webhook_reading_max_bytes",
			Help: "The most bytes webhook bodies being read and verified may hold (WEBHOOK_READING_MAX_MIB).",
		}, func() float64 { return float64(r.max) }))
	return r
}

func (r *Reading) take(n int64) bool {
	for {
		held := r.held.Load()
		if held+n > r.max {
			return false
		}
		if r.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

func (r *Reading) give(n int64) { r.held.Add(-n) }

// read reads req's body, at most limit bytes (more: a *http.MaxBytesError,
// 413), holding its buffer from the bound; release gives it back and must
// be called once the body is no longer needed unverified. A nil Reading
// bounds nothing.
func (r *Reading) read(w http.ResponseWriter, req *http.Request, limit int64) (body []byte, release func(), err error) {
	if r == nil {
		body, err = readBody(w, req, limit)
		return body, func() {}, err
	}
	if req.ContentLength > limit {
		return nil, nil, &http.MaxBytesError{Limit: limit} // refused before a byte of it is read
	}
	src := http.MaxBytesReader(w, req.Body, limit)
	// The buffer never needs more than the declared length (one more byte
	// to see the end without growing) or the limit.
	ceiling := limit + 1
	if n := req.ContentLength; n >= 0 && n < limit {
		ceiling = n + 1
	}
	size := min(int64(firstRead), ceiling)
	if !r.take(size) {
		return nil, nil, errReadingFull
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			held := int64(cap(buf))
			if held >= ceiling {
				r.give(held)
				return nil, nil, &http.MaxBytesError{Limit: limit}
			}
			next := min(2*held, ceiling)
			if !r.take(next) {
				r.give(held)
				return nil, nil, errReadingFull
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
			r.give(held)
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			held := int64(cap(buf))
			return buf, func() { r.give(held) }, nil
		}
		if err != nil {
			r.give(int64(cap(buf)))
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w: %w", errBadJSON, err)
		}
	}
}
