package client

import (
	"context"
	"net/http"
	"net/url"
)

// Warmup loads a flash voucher into the server's Redis gate (admin token).
// It reports whether this call loaded it (false: it was loaded already).
// Safe to retry.
func (c *Client) Warmup(ctx context.Context, code string) (bool, error) {
	var out struct {
		Loaded bool `json:"loaded"`
	}
	err := c.call(ctx, http.MethodPost, "/vouchers/"+url.PathEscape(code)+"/warmup", nil, &out, true)
	return out.Loaded, err
}
