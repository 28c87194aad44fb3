package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// 000050's redaction of raw PSP bodies: each provider's shapes lose the
// person's data at any depth and keep the ids, amounts and statuses the
// ledger and the PSP reconciliation read; the user id is replaced only
// where it is a whole value or token, never inside a longer id.
func TestErasureRedactsPSPBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, migrated(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const user, pseudonym = "u42", "erased:0123456789abcdef0123456789abcdef"
	cases := []struct {
		name, body string
		gone, kept []string
	}{
		{"stripe payment intent", `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":5000,
			"currency":"usd","status":"succeeded","receipt_email":"ann@example.org","metadata":{"user_id":"u42","note":"VIP Ann Smith"},
			"latest_charge":{"id":"ch_1","billing_details":{"name":"Ann Smith","email":"ann@example.org","phone":"+15550001",
			"address":{"line1":"1 Elm Row","country":"US"}},"payment_method_details":{"card":{"fingerprint":"FpAnn123","last4":"4242"}}}}}}`,
			[]string{"Ann Smith", "ann@example.org", "+15550001", "1 Elm Row", "FpAnn123", "4242", `"u42"`},
			[]string{`"evt_1"`, `"pi_1"`, `"ch_1"`, `5000`, `"usd"`, `"succeeded"`, pseudonym}},
		{"paystack charge", `{"event":"charge.success","data":{"id":4099260516,"reference":"ref_1","amount":70000,"currency":"NGN",
			"metadata":{"user_id":"u42","payout_id":"p-1"},"customer":{"customer_code":"CUS_1","first_name":"Ade","last_name":"Okafor",
			"email":"ade@example.ng","phone":"08031234567"},"authorization":{"authorization_code":"AUTH_1","bin":"408408","signature":"SIG_ade"}}}`,
			[]string{"Okafor", "ade@example.ng", "08031234567", "AUTH_1", "408408", "SIG_ade"},
			[]string{`4099260516`, `"ref_1"`, `70000`, `"CUS_1"`, `"p-1"`, pseudonym}},
		{"paystack transfer recipient", `{"event":"transfer.success","data":{"transfer_code":"TRF_1","amount":900,
			"recipient":{"recipient_code":"RCP_1","name":"Ade Okafor","details":{"account_number":"0123456789","account_name":"ADE OKAFOR","bank_name":"Zenith"}}}}`,
			[]string{"Ade Okafor", "0123456789", "ADE OKAFOR"},
			[]string{`"TRF_1"`, `"RCP_1"`, `900`}},
		{"stripe connected account", `{"id":"evt_3","type":"account.updated","account":"acct_1","data":{"object":{"id":"acct_1",
			"individual":{"first_name":"Ann","dob":{"day":1}},"business_profile":{"support_email":"help@ann.example","support_phone":"+15550002"}}}}`,
			[]string{"help@ann.example", "+15550002", `"dob"`},
			[]string{`"acct_1"`, `"account.updated"`}},
		{"the user id inside a longer id", `{"id":"u420","object":"x-u42-y","owner":null,"user":"u42"}`,
			[]string{`"user": "u42"`},
			[]string{`"u420"`, `"x-u42-y"`, pseudonym}},
	}
	for _, c := range cases {
		var out string
		if err := conn.QueryRow(ctx, `SELECT erasure_redact_text($1::text, $2, $3, erasure_needles($1::text::jsonb))`, c.body, user, pseudonym).Scan(&out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, v := range c.gone {
			if strings.Contains(out, v) {
				t.Errorf("%s: %q is still in %s", c.name, v, out)
			}
		}
		for _, v := range c.kept {
			if !strings.Contains(out, v) {
				t.Errorf("%s: %q is gone from %s", c.name, v, out)
			}
		}
	}
}
