package psp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvAddr                = "PSP_ADDR"
	EnvSeed                = "PSP_SEED"
	EnvFaults              = "PSP_FAULTS"
	EnvStripeWebhookURL    = "PSP_STRIPE_WEBHOOK_URL"
	EnvStripeWebhookSecret = "PSP_STRIPE_WEBHOOK_SECRET"
	EnvPaystackWebhookURL  = "PSP_PAYSTACK_WEBHOOK_URL"
	EnvPaystackSecretKey   = "PSP_PAYSTACK_SECRET_KEY"
	EnvSettleDelay         = "PSP_SETTLE_DELAY"
	EnvWebhookMaxAttempts  = "PSP_WEBHOOK_MAX_ATTEMPTS"
	EnvWebhookBackoff      = "PSP_WEBHOOK_BACKOFF"
	EnvIdempotencyWindow   = "PSP_IDEMPOTENCY_WINDOW"
	EnvBalances            = "PSP_BALANCES"
)

// Defaults.
const (
	DefaultAddr               = "127.0.0.1:12111"
	DefaultSettleDelay        = 2 * time.Second
	DefaultWebhookMaxAttempts = 5
	DefaultWebhookBackoff     = time.Second
	DefaultWebhookTimeout     = 10 * time.Second
	DefaultMaxCalls           = 100_000
	// DefaultIdempotencyWindow is how long Stripe keeps a key (24 hours).
	DefaultIdempotencyWindow = 24 * time.Hour
)

// Config configures a Server. The zero value is usable: no faults, seed 0,
// no webhooks, no auto-settlement.
type Config struct {
	// Addr is the listen address; only cmd/aegis-psp uses it.
	Addr string

	// Seed seeds the fault-injection random source. Two servers with the
	// same seed and the same sequence of requests make the same decisions.
	Seed uint64

	// Faults is the initial fault configuration (Provider "" = both PSPs).
	Faults FaultSpec

	// StripeWebhookURL receives Stripe events signed with StripeWebhookSecret.
	StripeWebhookURL    string
	StripeWebhookSecret string

	// PaystackWebhookURL receives Paystack events signed with PaystackSecretKey.
	PaystackWebhookURL string
	PaystackSecretKey  string

	// SettleDelay is how long after creation a payout/transfer is settled
	// automatically. Zero means never: only POST /_psp/objects/{id}/settle.
	SettleDelay time.Duration

	// WebhookMaxAttempts is the number of delivery attempts per event
	// (default 5); WebhookBackoff the delay before the second attempt,
	// doubled for each further one (default 1s); WebhookTimeout the limit of
	// one attempt (default 10s).
	WebhookMaxAttempts int
	WebhookBackoff     time.Duration
	WebhookTimeout     time.Duration

	// IdempotencyWindow is how long a Stripe Idempotency-Key and its saved
	// response are kept (default 24h, as Stripe); after it the key is
	// pruned and a request with it executes anew.
	IdempotencyWindow time.Duration

	// Balances is the starting available balance, per currency in minor
	// units, of the Stripe platform and of the Paystack integration
	// (balance.go). Nil means DefaultBalance in each default currency.
	Balances map[string]int64

	// StripeCardFee is what Stripe charges for each successful payment
	// (fees.go). Nil means Stripe's standard US card pricing, 2.9% + 30
	// (DefaultStripeFeeBasisPoints, DefaultStripeFeeFixed).
	StripeCardFee *FeeRate

	// MaxCalls bounds the call log (oldest entries are dropped first).
	// Default 100000.
	MaxCalls int

	// HTTPClient delivers webhooks. Nil means a private client whose idle
	// connections are closed when Run returns.
	HTTPClient *http.Client
}

// ConfigFromEnv builds a Config from environment variables looked up with
// getenv (os.Getenv in main). Errors name the offending variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		Addr:               DefaultAddr,
		SettleDelay:        DefaultSettleDelay,
		WebhookMaxAttempts: DefaultWebhookMaxAttempts,
		WebhookBackoff:     DefaultWebhookBackoff,
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }

	if err := refuseLiveKeys(get); err != nil {
		return Config{}, err
	}

	if v := get(EnvAddr); v != "" {
		cfg.Addr = v
	}

	if v := get(EnvSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Config{}, fmt.Errorf("%s: not an integer: %q", EnvSeed, v)
		}
		cfg.Seed = uint64(n)
	} else {
		cfg.Seed = uint64(time.Now().UnixNano())
	}

	if v := get(EnvFaults); v != "" {
		spec, err := ParseFaultSpec([]byte(v))
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvFaults, err)
		}
		cfg.Faults = spec
	}

	cfg.StripeWebhookURL = get(EnvStripeWebhookURL)
	if secrets := get(EnvStripeWebhookSecret); secrets != "" {
		first, _, _ := strings.Cut(secrets, ",")
		cfg.StripeWebhookSecret = strings.TrimSpace(first)
	}
	cfg.PaystackWebhookURL = get(EnvPaystackWebhookURL)
	cfg.PaystackSecretKey = get(EnvPaystackSecretKey)

	if v := get(EnvSettleDelay); v != "" {
		d, err := parseEnvDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvSettleDelay, err)
		}
		cfg.SettleDelay = d
	}
	if v := get(EnvWebhookMaxAttempts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s: want an integer >= 1, got %q", EnvWebhookMaxAttempts, v)
		}
		cfg.WebhookMaxAttempts = n
	}
	if v := get(EnvIdempotencyWindow); v != "" {
		d, err := parseEnvDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvIdempotencyWindow, err)
		}
		cfg.IdempotencyWindow = d
	}
	if v := get(EnvWebhookBackoff); v != "" {
		d, err := parseEnvDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvWebhookBackoff, err)
		}
		cfg.WebhookBackoff = d
	}

	if v := get(EnvBalances); v != "" {
		b, err := parseBalances(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvBalances, err)
		}
		cfg.Balances = b
	}

	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// liveKeyVars are the variables the stand-in refuses to start with when
// they hold a live-looking key: its own secrets, and the services' PSP
// secrets should it be started in an environment that holds them (it never
// reads them otherwise).
var liveKeyVars = []string{
	EnvStripeWebhookSecret, EnvPaystackSecretKey,
	"STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET", "PAYSTACK_SECRET_KEY",
}

// LiveKey reports whether key looks like a live Stripe or Paystack key:
// secret (sk_live_), restricted (rk_live_) or publishable (pk_live_). The
// stand-in never takes one: it is for development and tests only.
func LiveKey(key string) bool {
	for _, prefix := range []string{"sk_live_", "rk_live_", "pk_live_"} {
		if strings.Contains(key, prefix) {
			return true
		}
	}
	return false
}

// refuseLiveKeys fails, naming the variable but never its value, when one
// of liveKeyVars holds a live-looking key.
func refuseLiveKeys(get func(string) string) error {
	for _, name := range liveKeyVars {
		if LiveKey(get(name)) {
			return fmt.Errorf("%s holds a live PSP key: the stand-in is for development and tests only and never runs with production secrets", name)
		}
	}
	return nil
}

func parseEnvDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("not a duration (e.g. 2s, 500ms, 0): %q", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative: %q", v)
	}
	return d, nil
}

// validate checks cross-field rules; errors name environment variables
// because that is how the values usually arrive.
func (c Config) validate() error {
	if err := checkWebhookURL(EnvStripeWebhookURL, c.StripeWebhookURL); err != nil {
		return err
	}
	if c.StripeWebhookURL != "" && c.StripeWebhookSecret == "" {
		return fmt.Errorf("%s: required when %s is set", EnvStripeWebhookSecret, EnvStripeWebhookURL)
	}
	if err := checkWebhookURL(EnvPaystackWebhookURL, c.PaystackWebhookURL); err != nil {
		return err
	}
	if c.PaystackWebhookURL != "" && c.PaystackSecretKey == "" {
		return fmt.Errorf("%s: required when %s is set", EnvPaystackSecretKey, EnvPaystackWebhookURL)
	}
	if c.SettleDelay < 0 {
		return fmt.Errorf("%s: must not be negative", EnvSettleDelay)
	}
	if c.WebhookMaxAttempts < 0 {
		return fmt.Errorf("%s: must not be negative", EnvWebhookMaxAttempts)
	}
	if c.WebhookBackoff < 0 {
		return fmt.Errorf("%s: must not be negative", EnvWebhookBackoff)
	}
	if c.WebhookTimeout < 0 {
		return errors.New("WebhookTimeout: must not be negative")
	}
	if c.MaxCalls < 0 {
		return errors.New("MaxCalls: must not be negative")
	}
	if c.IdempotencyWindow < 0 {
		return fmt.Errorf("%s: must not be negative", EnvIdempotencyWindow)
	}
	if _, err := c.Faults.normalize(); err != nil {
		return fmt.Errorf("%s: %w", EnvFaults, err)
	}
	if err := validateBalances(c.Balances); err != nil {
		return fmt.Errorf("%s: %w", EnvBalances, err)
	}
	if c.StripeCardFee != nil {
		if err := c.StripeCardFee.validate(); err != nil {
			return fmt.Errorf("StripeCardFee: %w", err)
		}
	}
	return nil
}

func checkWebhookURL(name, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: want an absolute http(s) URL, got %q", name, raw)
	}
	return nil
}

// withDefaults fills the zero-valued tunables.
func (c Config) withDefaults() Config {
	if c.WebhookMaxAttempts == 0 {
		c.WebhookMaxAttempts = DefaultWebhookMaxAttempts
	}
	if c.WebhookBackoff == 0 {
		c.WebhookBackoff = DefaultWebhookBackoff
	}
	if c.WebhookTimeout == 0 {
		c.WebhookTimeout = DefaultWebhookTimeout
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = DefaultMaxCalls
	}
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = DefaultIdempotencyWindow
	}
	fee := FeeRate{BasisPoints: DefaultStripeFeeBasisPoints, Fixed: DefaultStripeFeeFixed}
	if c.StripeCardFee != nil {
		fee = *c.StripeCardFee // a copy: the caller's may change afterwards
	}
	c.StripeCardFee = &fee
	return c
}
