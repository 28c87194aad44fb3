module github.com/aegis-payments/aegis/tools/devstack

go 1.26.0

require (
	github.com/aegis-payments/aegis/migrations v0.0.0-00010101000000-000000000000
	github.com/aegis-payments/aegis/pkg v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/stripe/stripe-go/v76 v76.25.0
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace (
	github.com/aegis-payments/aegis/migrations => ../../migrations
	github.com/aegis-payments/aegis/pkg => ../../pkg
)
