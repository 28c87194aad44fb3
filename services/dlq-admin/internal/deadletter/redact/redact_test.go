package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/redact"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"plain keys", `{"account_number":"0123456789","amount":5000}`,
			`{"account_number":"[REDACTED]","amount":5000}`},
		{"case, dashes and camelCase", `{"Authorization":"Bearer x","X-Paystack-Signature":"ab","accountNumber":"1","IBAN":"DE89","apiKey":"k","APIKey":"k2"}`,
			`{"Authorization":"[REDACTED]","X-Paystack-Signature":"[REDACTED]","accountNumber":"[REDACTED]","IBAN":"[REDACTED]","apiKey":"[REDACTED]","APIKey":"[REDACTED]"}`},
		{"longer names", `{"client_secret":"s","access_token":"t","bank_account_number":"1","routing_number":"2","bvn":"3","password":"p"}`,
			`{"client_secret":"[REDACTED]","access_token":"[REDACTED]","bank_account_number":"[REDACTED]","routing_number":"[REDACTED]","bvn":"[REDACTED]","password":"[REDACTED]"}`},
		{"whole sensitive objects", `{"card":{"number":"4242424242424242","brand":"visa"},"authorization":{"authorization_code":"AUTH_x","last4":"4081"}}`,
			`{"card":"[REDACTED]","authorization":"[REDACTED]"}`},
		{"number only inside cards", `{"order_number":"0800","source":{"object":"card","number":"4242424242424242","exp_month":12,"exp_year":2030,"cvc":"123","last4":"4242"}}`,
			`{"order_number":"0800","source":{"object":"card","number":"[REDACTED]","exp_month":"[REDACTED]","exp_year":"[REDACTED]","cvc":"[REDACTED]","last4":"4242"}}`},
		{"personal data", `{"customer":{"email":"a@b.c","phone":"+234","first_name":"Ada","last_name":"O","customer_code":"CUS_1"},"billing_details":{"address":{"line1":"1 Road"},"name":"Ada"},"receipt_email":"a@b.c","dob":"1990-01-01","amount":5}`,
			`{"customer":{"email":"[REDACTED]","phone":"[REDACTED]","first_name":"[REDACTED]","last_name":"[REDACTED]","customer_code":"CUS_1"},"billing_details":{"address":"[REDACTED]","name":"[REDACTED]"},"receipt_email":"[REDACTED]","dob":"[REDACTED]","amount":5}`},
		{"cards lists", `{"saved_cards":[{"number":"4000056655665556","expMonth":1}],"items":[{"number":3}]}`,
			`{"saved_cards":[{"number":"[REDACTED]","expMonth":"[REDACTED]"}],"items":[{"number":3}]}`},
		{"nested raw object", `{"provider":"stripe","raw":{"data":{"object":{"payment_method_details":{"card":{"number":"4242424242424242"}},"metadata":{"user_id":"u1"}}}}}`,
			`{"provider":"stripe","raw":{"data":{"object":{"payment_method_details":{"card":"[REDACTED]"},"metadata":{"user_id":"u1"}}}}}`},
		{"raw as a JSON string", `{"raw":"{\"iban\":\"DE89\",\"card\":{\"number\":\"4242\"},\"ok\":1}"}`,
			`{"raw":"{\"iban\":\"[REDACTED]\",\"card\":\"[REDACTED]\",\"ok\":1}"}`},
		{"raw string that only looks like JSON", `{"raw":"{not json 0123456789"}`, `{"raw":"[REDACTED]"}`},
		{"arrays and scalars kept", `[1,"a",null,true,{"token":"t"},12345678901234567890]`,
			`[1,"a",null,true,{"token":"[REDACTED]"},12345678901234567890]`},
		{"not an object", `"0123456789"`, `"0123456789"`},
		{"html not escaped", `{"note":"<b>&</b>"}`, `{"note":"<b>&</b>"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := redact.JSON([]byte(tc.in), redact.Personal)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got), "key order and numbers are kept")
			require.True(t, json.Valid(got))
		})
	}
}

// Operators see the payload as stored, personal data and bank details
// included; credentials and card data stay hidden from everyone.
func TestJSONForOperators(t *testing.T) {
	t.Parallel()
	in := `{"account_number":"0123456789","iban":"DE89","customer":{"email":"a@b.c","name":"Ada"},"card":{"number":"4242"},"client_secret":"s","raw":"{\"phone\":\"+234\",\"token\":\"t\"}"}`
	want := `{"account_number":"0123456789","iban":"DE89","customer":{"email":"a@b.c","name":"Ada"},"card":"[REDACTED]","client_secret":"[REDACTED]","raw":"{\"phone\":\"+234\",\"token\":\"[REDACTED]\"}"}`
	got, err := redact.JSON([]byte(in), redact.Secrets)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
}

func TestJSONRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `garbage`, `{"a":1} {"b":2}`, `{"a":`, "\xff"} {
		_, err := redact.JSON([]byte(in), redact.Secrets)
		require.Error(t, err, "%q", in)
	}
}

func TestSensitiveKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"token", "Stripe-Signature", "secret_key", "cvv", "card_number", "authorization_code"} {
		require.True(t, redact.SensitiveKey(k), k)
	}
	for _, k := range []string{"number", "amount", "user_id", "tokenization_method", "correlation_id", "event_type"} {
		require.False(t, redact.SensitiveKey(k), k)
	}
}
