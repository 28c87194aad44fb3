package proctest

import (
	"net"
	"strconv"
	"testing"
)

// A port from Port is free to bind, and outside the kernel's ephemeral
// range, where an outgoing connection could take it before the process
// that was handed it binds it.
func TestPortIsBindableAndBelowTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	for range 20 {
		port, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if lo > portsFrom+1000 && (port < portsFrom || port >= lo) {
			t.Fatalf("port %d is outside [%d, %d)", port, portsFrom, lo)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Ports hands out distinct ports: a stack's ports drawn one by one from Port
// could repeat (300 draws from Port's range repeat one 97 times in 100), and
// the service given the second copy exits at startup (address in use).
func TestPortsAreDistinct(t *testing.T) {
	ports, err := Ports(300)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
