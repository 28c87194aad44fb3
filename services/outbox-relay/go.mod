module github.com/aegis-payments/aegis/services/outbox-relay

go 1.26.0

require (
	github.com/aegis-payments/aegis/migrations v0.0.0-00010101000000-000000000000
	github.com/aegis-payments/aegis/pkg v0.0.0-00010101000000-000000000000
)

replace (
	github.com/aegis-payments/aegis/migrations => ../../migrations
	github.com/aegis-payments/aegis/pkg => ../../pkg
)
