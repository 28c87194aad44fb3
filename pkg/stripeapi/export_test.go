package stripeapi

import (
	"context"

	"github.com/stripe/stripe-go/v76"
)

// CreateTransferWith sends CreateTransfer's request with one more form
// parameter: what a request Stripe does not know looks like.
func (c *Client) CreateTransferWith(ctx context.Context, r TransferRequest, key, value string) (*stripe.Transfer, error) {
	params := transferParams(ctx, r)
	params.AddExtra(key, value)
	return c.transfers.New(params)
}
