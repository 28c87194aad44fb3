package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
)

func registerBody(t *testing.T, url, user string, body map[string]string) answer {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return post(t, url+"/v1/users/"+user+"/destinations", b, map[string]string{"Authorization": "Bearer " + clientToken})
}

// A Stripe connected account is registered only once Stripe confirmed it
// can be paid, with what Stripe said; a refusal registers nothing.
func TestStripeConnectedAccountsAreCheckedAtStripe(t *testing.T) {
	t.Parallel()
	b := setup(t)

	ok := registerBody(t, b.url, "user-1", map[string]string{"provider": "stripe", "destination": "acct_1Alice"})
	require.Equal(t, 201, ok.status, ok.body)
	require.Equal(t, "connected_account", ok.body["type"])
	require.NotNil(t, ok.body["psp_checked_at"], "the registration says when Stripe confirmed it")
	check := ok.body["psp_check"].(map[string]any)["account"].(map[string]any)
	require.Equal(t, "active", check["transfers"])
	require.Nil(t, ok.body["external_account"])
	require.Nil(t, ok.body["currency"], "a transfer to a connected account may be in any currency")

	withBank := registerBody(t, b.url, "user-2", map[string]string{"provider": "stripe", "destination": "acct_1Bob",
		"external_account": "ba_1Bob"})
	require.Equal(t, 201, withBank.status, withBank.body)
	require.Equal(t, "ba_1Bob", withBank.body["external_account"])
	require.Equal(t, "usd", withBank.body["currency"], "the external account's currency, as Stripe said")
	again := registerBody(t, b.url, "user-2", map[string]string{"provider": "stripe", "destination": "acct_1Bob",
		"external_account": "ba_1Bob"})
	require.Equal(t, 200, again.status, again.body)
	other := registerBody(t, b.url, "user-2", map[string]string{"provider": "stripe", "destination": "acct_1Bob",
		"external_account": "ba_2Bob"})
	require.Equal(t, 409, other.status, other.body)
	require.Equal(t, "destination_registered_otherwise", other.errorCode())

	before := count(t, b.db, "SELECT count(*) FROM destinations")
	for _, c := range []struct {
		body map[string]string
		code string
	}{
		{map[string]string{"provider": "stripe", "destination": "acct_missing1"}, "destination_unknown"},
		{map[string]string{"provider": "stripe", "destination": "acct_notransfers1"}, "destination_not_payable"},
		{map[string]string{"provider": "stripe", "destination": "acct_nopayouts1", "external_account": "ba_1"}, "destination_not_payable"},
		{map[string]string{"provider": "stripe", "destination": "acct_1Carol", "external_account": "ba_other1"}, "destination_unknown"},
	} {
		r := registerBody(t, b.url, "user-3", c.body)
		require.Equal(t, 422, r.status, "%v: %v", c.body, r.body)
		require.Equal(t, c.code, r.errorCode(), c.body)
	}
	for _, bad := range []map[string]string{
		{"provider": "paystack", "destination": "RCP_1", "external_account": "ba_2"},
		{"provider": "stripe", "destination": "acct_1", "external_account": "acct_2"},
	} {
		r := registerBody(t, b.url, "user-3", bad)
		require.Equal(t, 400, r.status, "%v: %v", bad, r.body)
		require.Equal(t, "invalid_request", r.errorCode())
	}
	require.Equal(t, before, count(t, b.db, "SELECT count(*) FROM destinations"), "a refused destination is not registered")
}

// A Paystack recipient is registered with its currency, and a payout in
// another currency is refused.
func TestPaystackRecipientsAreCheckedAndPaidInTheirCurrency(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	b := bundle{db: db, url: newServerWith(t, db.Pool, []string{stripeSecret}, options{paystack: true})}
	ngn := registerBody(t, b.url, "user-1", map[string]string{"provider": "paystack", "destination": "RCP_1Ada"})
	require.Equal(t, 201, ngn.status, ngn.body)
	require.Equal(t, "ngn", ngn.body["currency"])
	usd := registerBody(t, b.url, "user-1", map[string]string{"provider": "paystack", "destination": "RCP_usd1Ada"})
	require.Equal(t, 201, usd.status, usd.body)
	require.Equal(t, "usd", usd.body["currency"])
	missing := registerBody(t, b.url, "user-1", map[string]string{"provider": "paystack", "destination": "RCP_missing1"})
	require.Equal(t, 422, missing.status, missing.body)
	require.Equal(t, "destination_unknown", missing.errorCode())

	wrong := payoutRequest(t, b.url, clientToken, "k-usd",
		`{"user_id":"user-1","amount":100,"currency":"ngn","destination":"RCP_usd1Ada","provider":"paystack"}`)
	require.Equal(t, 422, wrong.status, wrong.body)
	require.Equal(t, "currency_mismatch", wrong.errorCode())
	right := payoutRequest(t, b.url, clientToken, "k-ngn",
		`{"user_id":"user-1","amount":100,"currency":"ngn","destination":"RCP_1Ada","provider":"paystack"}`)
	require.Equal(t, 202, right.status, right.body)
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM payouts"))
}

// A PSP that cannot be asked registers nothing and says so: 503.
func TestADestinationIsNotRegisteredWhenItsPSPCannotBeAsked(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	url := newServerWith(t, db.Pool, []string{stripeSecret}, options{pspURL: "http://" + proctest.Addr(proctest.FreePort(t))})
	for _, body := range []map[string]string{
		{"provider": "stripe", "destination": "acct_1"},
		{"provider": "paystack", "destination": "RCP_1"},
	} {
		r := registerBody(t, url, "user-1", body)
		require.Equal(t, 503, r.status, r.body)
		require.Equal(t, "psp_unavailable", r.errorCode())
	}
	require.Equal(t, 0, count(t, db, "SELECT count(*) FROM destinations"))
}

// Stripe pays other people only through Connect: a Stripe destination that
// is not a connected account (a bare external account, which would be the
// platform's own, or anything else) is refused with what to register
// instead, and nothing is registered or asked of Stripe.
func TestStripeDestinationsAreConnectedAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []map[string]string{
		{"provider": "stripe", "destination": "ba_1Alice"},
		{"provider": "stripe", "destination": "card_1Alice"},
		{"provider": "stripe", "destination": "ba_1Alice", "external_account": "ba_2Alice"},
		{"provider": "stripe", "destination": "RCP_1Alice"},
		{"provider": "stripe", "destination": "po_1Alice"},
		{"provider": "stripe", "destination": "ACCT_1Alice"},
	} {
		r := registerBody(t, b.url, "user-1", body)
		require.Equal(t, 422, r.status, "%v: %v", body, r.body)
		require.Equal(t, "destination_not_connected_account", r.errorCode(), body)
		msg := r.body["error"].(map[string]any)["message"].(string)
		require.Contains(t, msg, body["destination"])
		require.Contains(t, msg, destinations.ConnectMessage)
		require.Contains(t, msg, "nothing was registered")
	}
	require.Equal(t, 0, count(t, b.db, "SELECT count(*) FROM destinations"))
	require.Equal(t, 201, registerBody(t, b.url, "user-1", map[string]string{"provider": "stripe", "destination": "acct_1Alice",
		"external_account": "ba_1Alice"}).status)
}

// A bare Stripe destination registered before Connect and disabled by
// migration 000039 takes no new payout, by value or by id, and cannot be
// registered again; a payout accepted before keeps it.
func TestBareStripeDestinationsDisabledByTheMigrationTakeNoPayouts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const id = "01930000-0000-7000-8000-0000000003a1"
	_, err := b.db.Pool.Exec(ctx, `INSERT INTO destinations (id, user_id, provider, destination, type, created_by)
		VALUES ($1::uuid, 'user-1', 'stripe', 'ba_1Legacy', 'bank_account', 'acme')`, id)
	require.NoError(t, err)
	before := payoutRequest(t, b.url, clientToken, "legacy-1",
		`{"user_id":"user-1","amount":100,"currency":"usd","destination":"ba_1Legacy","provider":"stripe"}`)
	require.Equal(t, 202, before.status, "the previous release accepted payouts to it: %v", before.body)

	up, err := migrations.FS.ReadFile("000039_disable_bare_stripe_destinations.up.sql")
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, string(up))
	require.NoError(t, err)

	list := get(t, b.url+"/v1/users/user-1/destinations?status=disabled", clientToken)
	require.Equal(t, 200, list.status, list.body)
	items := list.body["items"].([]any)
	require.Len(t, items, 1)
	d := items[0].(map[string]any)
	require.Equal(t, "migration 000039", d["disabled_by"])
	require.Contains(t, d["disabled_reason"], destinations.ConnectMessage, "the reason registration gives")

	for key, body := range map[string]string{
		"legacy-2": `{"user_id":"user-1","amount":100,"currency":"usd","destination":"ba_1Legacy","provider":"stripe"}`,
		"legacy-3": `{"user_id":"user-1","amount":100,"currency":"usd","destination_id":"` + id + `","provider":"stripe"}`,
	} {
		r := payoutRequest(t, b.url, clientToken, key, body)
		require.Equal(t, 422, r.status, "%s: %v", key, r.body)
		require.Equal(t, "destination_not_registered", r.errorCode(), key)
	}
	again := registerBody(t, b.url, "user-1", map[string]string{"provider": "stripe", "destination": "ba_1Legacy"})
	require.Equal(t, 422, again.status, again.body)
	require.Equal(t, "destination_not_connected_account", again.errorCode())
	require.Equal(t, 1, count(t, b.db, "SELECT count(*) FROM payouts"))
	var status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status FROM payouts WHERE idempotency_key = 'legacy-1'`).Scan(&status))
	require.Equal(t, "INITIALIZED", status, "the migration changes no accepted payout")
}
