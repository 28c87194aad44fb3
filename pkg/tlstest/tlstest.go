// Package tlstest makes a throwaway certificate authority and certificates
// for 127.0.0.1/localhost, as PEM files, for tests that run a real TLS
// server (kfake, redis-server, Postgres) and check that Aegis's clients
// verify it. Test code only.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and one server and one client certificate it signed, written
// to a test's temporary directory.
type PKI struct {
	// CAFile is the CA certificate (PEM).
	CAFile string
	// ServerCertFile and ServerKeyFile are for 127.0.0.1 and localhost.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are for mutual TLS.
	ClientCertFile, ClientKeyFile string
}

// New makes a fresh PKI; every call has its own CA.
func New(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aegis test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatalf("tlstest: %v", err)
		}
		return p
	}
	leaf := func(name string, usage x509.ExtKeyUsage, serial int64) (certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("tlstest: %s: %v", name, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatalf("tlstest: %s: %v", name, err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	p := PKI{CAFile: write("ca.pem", "CERTIFICATE", caDER)}
	p.ServerCertFile, p.ServerKeyFile = leaf("server", x509.ExtKeyUsageServerAuth, 2)
	p.ClientCertFile, p.ClientKeyFile = leaf("client", x509.ExtKeyUsageClientAuth, 3)
	return p
}

// ServerCertificate loads the server certificate for a tls.Config.
func (p PKI) ServerCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.ServerCertFile, p.ServerKeyFile)
	if err != nil {
		t.Fatalf("tlstest: server certificate: %v", err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return k
}
