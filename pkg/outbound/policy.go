package outbound

import "github.com/aegis-payments/aegis/pkg/config"

// ReadPolicy reads the URL safety policy, the same in every service that
// checks endpoint URLs (dlq-admin when one is registered, outbox-relay when
// it connects):
//
//	OUTBOUND_ALLOW_HTTP     development only: endpoint URLs may be http:// (production: https only)
//	OUTBOUND_ALLOW_PRIVATE  development only: endpoints may be or resolve to private, loopback or link-local
//	                        addresses (checked when registered and at connect time, after DNS)
func ReadPolicy(env *config.Env) Policy {
	return Policy{
		AllowHTTP:    env.Bool("OUTBOUND_ALLOW_HTTP", false),
		AllowPrivate: env.Bool("OUTBOUND_ALLOW_PRIVATE", false),
	}
}
