package client

import (
	"context"
	"net/http"
	"net/url"
)

// WarmupResult is the answer of Warmup.
type WarmupResult struct {
	// InRedis reports that the voucher is in the server's Redis gate now.
	// It is false only when another instance was still loading it after a
	// short wait: call Warmup again.
	InRedis bool `json:"inRedis"`
	// LoadedByThisCall reports that this call wrote it (false: it was
	// there already, or another instance loaded it).
	LoadedByThisCall bool `json:"loadedByThisCall"`
}

// Warmup loads a flash voucher into the server's Redis gate (admin token).
// Safe to retry.
func (c *Client) Warmup(ctx context.Context, code string) (WarmupResult, error) {
	var out WarmupResult
	err := c.call(ctx, http.MethodPost, "/vouchers/"+url.PathEscape(code)+"/warmup", nil, &out, true)
	return out, err
}
