package kafkax

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/aegis-payments/aegis/pkg/config"
)

// SASL mechanisms Aegis speaks (KAFKA_SASL_MECHANISM).
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// Security is how a client reaches a managed Kafka: TLS to encrypt and check
// the brokers, SASL to authenticate. The zero value is plaintext without
// authentication, which is what the local stack and docker-compose use.
type Security struct {
	// TLS is nil for a plaintext connection.
	TLS *tls.Config
	// Mechanism is "" (no SASL) or one of the Mechanism constants.
	Mechanism string
	User      string
	// Password never appears in logs or errors.
	Password string
}

// ReadSecurity reads the Kafka connection's security settings:
//
//	KAFKA_TLS                  true: connect with TLS (default false; implied by the other KAFKA_TLS_* variables)
//	KAFKA_TLS_CA_FILE          PEM bundle of the CAs that sign the brokers' certificates (default: the system's)
//	KAFKA_TLS_CERT_FILE        PEM client certificate for mutual TLS, with KAFKA_TLS_KEY_FILE
//	KAFKA_TLS_KEY_FILE         PEM private key of KAFKA_TLS_CERT_FILE
//	KAFKA_TLS_SERVER_NAME      name to verify in the brokers' certificates (default: the broker's host)
//	KAFKA_SASL_MECHANISM       PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)
//	KAFKA_SASL_USERNAME        SASL user
//	KAFKA_SASL_PASSWORD        SASL password
//
// Certificate files are read here, so a missing or malformed one fails at
// startup naming its variable. SASL PLAIN sends the password as is: it is
// refused without TLS.
func ReadSecurity(env *config.Env) Security {
	var s Security
	ca, _ := env.Lookup("KAFKA_TLS_CA_FILE")
	cert, _ := env.Lookup("KAFKA_TLS_CERT_FILE")
	key, _ := env.Lookup("KAFKA_TLS_KEY_FILE")
	serverName, _ := env.Lookup("KAFKA_TLS_SERVER_NAME")
	if env.Bool("KAFKA_TLS", false) || ca != "" || cert != "" || key != "" || serverName != "" {
		s.TLS = readTLS(env, ca, cert, key, serverName)
	}

	s.Mechanism = strings.ToUpper(env.String("KAFKA_SASL_MECHANISM", ""))
	s.User = env.String("KAFKA_SASL_USERNAME", "")
	s.Password = env.String("KAFKA_SASL_PASSWORD", "")
	switch s.Mechanism {
	case "":
		if s.User != "" || s.Password != "" {
			env.Errorf("KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD need KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return s
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
	default:
		env.Errorf("KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", s.Mechanism)
		return s
	}
	if s.User == "" || s.Password == "" {
		env.Errorf("KAFKA_SASL_MECHANISM=%s needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD", s.Mechanism)
	}
	if s.Mechanism == MechanismPlain && s.TLS == nil {
		env.Errorf("KAFKA_SASL_MECHANISM=PLAIN sends the password in clear: set KAFKA_TLS=true")
	}
	return s
}

func readTLS(env *config.Env, caFile, certFile, keyFile, serverName string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			env.Errorf("KAFKA_TLS_CA_FILE: %v", err)
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				env.Errorf("KAFKA_TLS_CA_FILE %s holds no PEM certificate", caFile)
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			env.Errorf("KAFKA_TLS_CERT_FILE/KAFKA_TLS_KEY_FILE: %v", err)
		} else {
			cfg.Certificates = []tls.Certificate{pair}
		}
	case certFile != "" || keyFile != "":
		env.Errorf("KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together")
	}
	return cfg
}

// Opts are the franz-go options for s.
func (s Security) Opts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		// A dialer per client: franz-go sets ServerName from the broker's
		// host when the config leaves it empty.
		opts = append(opts, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	if m := s.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

func (s Security) mechanism() sasl.Mechanism {
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case MechanismScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case MechanismScramSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// String describes s without its secrets, for startup logs.
func (s Security) String() string {
	var b strings.Builder
	if s.TLS != nil {
		b.WriteString("tls")
	} else {
		b.WriteString("plaintext")
	}
	if s.Mechanism != "" {
		fmt.Fprintf(&b, "+sasl/%s(user=%s)", s.Mechanism, s.User)
	}
	return b.String()
}
