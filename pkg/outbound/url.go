package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// maxURLLength bounds an endpoint URL (outbound_endpoints.url).
const maxURLLength = 2048

// ErrURL is an endpoint URL that must not be delivered to.
var ErrURL = errors.New("endpoint url refused")

// Policy says which endpoint URLs are allowed. The zero Policy is
// production's: https only, public addresses only.
type Policy struct {
	// AllowHTTP allows plain http (development, tests).
	AllowHTTP bool
	// AllowPrivate allows private, loopback and link-local addresses
	// (a receiver on the developer's machine or in the cluster).
	AllowPrivate bool
}

// CheckURL refuses raw as an endpoint URL unless it is absolute, https
// (or http under AllowHTTP), without credentials or a fragment, and its
// host, if it is an address, is allowed. A host name is checked again at
// connect time (Control), when its address is known.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if raw == "" || len(raw) > maxURLLength {
		return nil, fmt.Errorf("%w: an endpoint url is 1 to %d characters", ErrURL, maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the URL: say what is wrong without it.
		return nil, fmt.Errorf("%w: not a URL", ErrURL)
	}
	switch {
	case u.Scheme != "https" && (!p.AllowHTTP || u.Scheme != "http"):
		return nil, fmt.Errorf("%w: the scheme must be https", ErrURL)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: no host", ErrURL)
	case u.User != nil:
		return nil, fmt.Errorf("%w: credentials in the url (use the signature to authenticate Aegis)", ErrURL)
	case u.Fragment != "" || u.RawFragment != "":
		return nil, fmt.Errorf("%w: a fragment is never sent", ErrURL)
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := p.checkAddr(addr); err != nil {
			return nil, err
		}
	} else if !p.AllowPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost") ||
		strings.HasSuffix(host, ".internal") || strings.HasSuffix(host, ".local")) {
		return nil, fmt.Errorf("%w: %s is a local name", ErrURL, host)
	}
	return u, nil
}

// checkAddr refuses an address that is not a public unicast one unless
// AllowPrivate. The cloud metadata addresses are refused with the rest:
// 169.254.169.254 is link-local, AWS's fd00:ec2::254 is private (and named
// anyway); so is the carrier-grade NAT range 100.64.0.0/10 (RFC 6598).
func (p Policy) checkAddr(addr netip.Addr) error {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%w: %s is not a unicast address", ErrURL, addr)
	}
	if p.AllowPrivate {
		return nil
	}
	if addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(addr) || addr == netip.MustParseAddr("fd00:ec2::254") {
		return fmt.Errorf("%w: %s is not a public address", ErrURL, addr)
	}
	return nil
}

// Control is a net.Dialer Control function: it refuses a connection to an
// address CheckURL would refuse, after DNS resolved the name, so a name
// that changed its address since it was checked (DNS rebinding) is still
// refused. Proxies are not used for deliveries (a proxy would connect in
// our stead, unchecked).
func (p Policy) Control(_ context.Context, network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrURL, network, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is not an address", ErrURL, host)
	}
	return p.checkAddr(addr)
}

// Redact is what logs, errors and alerts may show of an endpoint URL: its
// scheme and host. The path and the query are where receivers put tokens.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid url)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
