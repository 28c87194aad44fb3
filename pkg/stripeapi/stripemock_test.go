package stripeapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
)

// stripeMock runs stripe-mock (github.com/stripe/stripe-mock, pinned as a
// tool in pkg/go.mod): Stripe's own mock server, which validates every
// request against Stripe's published OpenAPI description and refuses one
// with a parameter, a path or a value the description does not allow. It
// answers fixtures and keeps no state, so these tests prove that each
// request Aegis sends is one Stripe accepts; what Stripe does with it over
// time is the stand-in's (tools/devstack/internal/psp).
func stripeMock(t *testing.T) *stripeapi.Client {
	t.Helper()
	bin := proctest.Build(t, t.TempDir(), "github.com/stripe/stripe-mock", false)
	ports := proctest.FreePorts(t, 2)
	addr := proctest.Addr(ports[0])
	// stripe-mock serves HTTPS as well, on 12112 unless told otherwise.
	p := proctest.Start(t, "stripe-mock", bin, nil, "-http-addr", addr, "-https-addr", proctest.Addr(ports[1]))
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/balance", nil)
		req.SetBasicAuth("sk_test_aegis", "")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if p.Exited() || ctx.Err() != nil {
			t.Fatalf("stripe-mock not ready at %s (last error %v):\n%s", url, err, strings.Join(p.Lines(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stripeapi.New("sk_test_aegis", url, &http.Client{Timeout: 10 * time.Second})
}

// refused says why stripe-mock refused a request ("" when it accepted).
func refused(err error) string {
	if err == nil {
		return ""
	}
	var se *stripe.Error
	if errors.As(err, &se) {
		return se.Msg
	}
	return err.Error()
}

func accepted(t *testing.T, what string, err error) {
	t.Helper()
	if why := refused(err); why != "" {
		t.Fatalf("%s: refused by Stripe's API description: %s", what, why)
	}
}

// listed ranges a listing and fails on a refused page.
func listed[T any](t *testing.T, what string, seq func(func(T, error) bool)) int {
	t.Helper()
	n := 0
	for _, err := range seq {
		accepted(t, what, err)
		n++
	}
	return n
}

// TestStripeAcceptsEveryRequestAegisSends sends each kind of request the
// product sends to Stripe, with the parameters the product sets, and fails
// on any stripe-mock refuses.
func TestStripeAcceptsEveryRequestAegisSends(t *testing.T) {
	c := stripeMock(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Hour)
	meta := map[string]string{"payout_id": "0193b0a4-6f1e-7c55-9a6e-0c7e4f1d2a11"}

	tr, err := c.CreateTransfer(ctx, stripeapi.TransferRequest{
		Money: stripeapi.Money{Amount: 1500, Currency: "usd"}, Destination: "acct_1Aegis",
		TransferGroup: meta["payout_id"], Metadata: meta, IdempotencyKey: "aegis-payout-" + meta["payout_id"],
	})
	accepted(t, "create transfer", err)
	_, err = c.Transfer(ctx, tr.ID)
	accepted(t, "retrieve transfer", err)
	listed(t, "list transfers by group", c.Transfers(ctx, stripeapi.TransferQuery{Since: since, TransferGroup: meta["payout_id"]}))
	listed(t, "list transfers by destination", c.Transfers(ctx, stripeapi.TransferQuery{Since: since, Destination: "acct_1Aegis"}))

	for _, account := range []string{"", "acct_1Aegis"} {
		po, err := c.CreatePayout(ctx, stripeapi.PayoutRequest{
			Money: stripeapi.Money{Amount: 1500, Currency: "usd"}, Account: account, Destination: "ba_1Aegis",
			Metadata: meta, IdempotencyKey: "aegis-payout-" + meta["payout_id"] + "-po",
		})
		accepted(t, "create payout (account "+account+")", err)
		_, err = c.Payout(ctx, account, po.ID)
		accepted(t, "retrieve payout", err)
		listed(t, "list payouts", c.Payouts(ctx, stripeapi.PayoutQuery{Account: account, Since: since, Destination: "ba_1Aegis"}))
	}

	acct, err := c.Account(ctx, "acct_1Aegis")
	accepted(t, "retrieve account", err)
	if acct.ID == "" {
		t.Fatal("retrieve account: no id in the answer")
	}
	for _, ext := range []string{"ba_1Aegis", "card_1Aegis"} {
		ea, err := c.ExternalAccount(ctx, "acct_1Aegis", ext)
		accepted(t, "retrieve external account "+ext, err)
		if ea.Object == "" || ea.Currency == "" {
			t.Fatalf("retrieve external account %s: %+v lacks its kind or currency", ext, ea)
		}
	}

	listed(t, "list balance transactions with their sources", c.BalanceTransactions(ctx, since, time.Now()))
	for _, account := range []string{"", "acct_1Aegis"} {
		bal, err := c.Balance(ctx, account)
		accepted(t, "retrieve balance (account "+account+")", err)
		if len(bal.Available) == 0 {
			t.Fatalf("retrieve balance (account %s): no available amount in the answer", account)
		}
	}

	for _, account := range []string{"", "acct_1Aegis"} {
		if n := listed(t, "list events (account "+account+")", c.Events(ctx, account, since)); n == 0 {
			t.Fatalf("list events (account %s): no event read from stripe-mock's fixture list", account)
		}
	}
}

// TestStripeMockRefusesARequestStripeDoesNotKnow shows the check can fail:
// the same transfer with one parameter Stripe's API does not define is
// refused, and the refusal says why.
func TestStripeMockRefusesARequestStripeDoesNotKnow(t *testing.T) {
	c := stripeMock(t)
	_, err := c.CreateTransferWith(context.Background(), stripeapi.TransferRequest{
		Money: stripeapi.Money{Amount: 1500, Currency: "usd"}, Destination: "acct_1Aegis", IdempotencyKey: "k1",
	}, "payout_reference", "x")
	why := refused(err)
	if why == "" {
		t.Fatal("a transfer with an unknown parameter was accepted: the check proves nothing")
	}
	if !strings.Contains(why, "additional properties") {
		t.Fatalf("refused for another reason than the unknown parameter: %s", why)
	}
	t.Logf("refused as expected: %s", why)
}
