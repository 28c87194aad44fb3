package hmacsig

import (
	"crypto/sha256"
	"testing"
)

// The RFC 4231 test case 2 vector: HMAC-SHA256 of "what do ya want for
// nothing?" under "Jefe", written in two parts.
func TestHexMatchesTheRFCVector(t *testing.T) {
	t.Parallel()
	got := Hex(sha256.New, []byte("Jefe"), []byte("what do ya want "), []byte("for nothing?"))
	want := "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Fatalf("Hex = %s, want %s", got, want)
	}
	if !Equal(got, want) || Equal(got, want[:10]) || Equal(got, "") {
		t.Fatal("Equal must accept only the same digest")
	}
	k := NewKeyed(sha256.New, []byte("Jefe"))
	for range 3 { // a reused state gives the same digest
		if got := k.Hex([]byte("what do ya want "), []byte("for nothing?")); got != want {
			t.Fatalf("Keyed.Hex = %s, want %s", got, want)
		}
	}
}
