package pricing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing/pricedoc"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

// MaxBodyBytes caps what is read from either endpoint. The live price system is about
// 93 KiB and the product listing a few hundred bytes; anything past 1 MiB is not a price
// list, and reading it unbounded would let a broken proxy exhaust the controller's memory.
const MaxBodyBytes = 1 << 20

// DefaultRequestTimeout bounds one request, connection to last byte. The refresher runs off
// the provisioning path, so a generous bound costs nothing, while none at all would let a
// stalled endpoint pin the refresher forever.
const DefaultRequestTimeout = 30 * time.Second

// Failure reasons, the values of the failures metric's reason label.
const (
	ReasonRequest   = "request"   // the request could not be made or the connection broke
	ReasonTimeout   = "timeout"   // no complete answer within the request timeout
	ReasonStatus    = "status"    // an HTTP status other than 200
	ReasonTooLarge  = "too_large" // a body larger than MaxBodyBytes
	ReasonMalformed = pricedoc.KindMalformed
	ReasonInvalid   = pricedoc.KindInvalid
	ReasonSink      = "sink" // the catalogue refused the update
)

// Endpoints, the values of the failures metric's endpoint label. The product listing is
// not one of them any more: since 2026-09 it answers 401 without a token, and a listing that
// cannot be read no longer fails the refresh (see ListingStatus and the
// product_listing_available gauge); EndpointProduct still names it in logs and errors.
const (
	EndpointProduct     = "product"
	EndpointPriceSystem = "price_system"
	EndpointCatalog     = "catalog"
)

// refreshError is one failed refresh, classified for the metrics and the logs.
type refreshError struct {
	endpoint string
	reason   string
	// status is the HTTP status of a ReasonStatus failure, 0 otherwise.
	status int
	err    error
}

func (e *refreshError) Error() string { return fmt.Sprintf("%s: %v", e.endpoint, e.err) }
func (e *refreshError) Unwrap() error { return e.err }

func classify(endpoint string, err error) *refreshError {
	var re *refreshError
	if errors.As(err, &re) {
		return re
	}
	var rej *RejectError
	if errors.As(err, &rej) {
		return &refreshError{endpoint: endpoint, reason: rej.Kind(), err: err}
	}
	return &refreshError{endpoint: endpoint, reason: ReasonRequest, err: err}
}

// fetch GETs target and returns its body, which must come with status 200 and fit in
// maxBytes.
func fetch(ctx context.Context, client *http.Client, target string, timeout time.Duration, maxBytes int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, &refreshError{reason: ReasonRequest, err: fmt.Errorf("building request for %s: %w", target, err)}
	}
	req.Header.Set("User-Agent", version.UserAgent())
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, &refreshError{reason: transportReason(ctx, err), err: fmt.Errorf("GET %s: %w", target, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, &refreshError{reason: ReasonStatus, status: resp.StatusCode, err: fmt.Errorf("GET %s: HTTP status %s, want 200", target, resp.Status)}
	}
	// A declared length over the cap is refused before reading a byte of it.
	if resp.ContentLength > maxBytes {
		return nil, &refreshError{reason: ReasonTooLarge, err: fmt.Errorf("GET %s: body of %d bytes, more than the %d accepted", target, resp.ContentLength, maxBytes)}
	}
	// One byte past the cap tells "exactly at the cap" from "over it", whatever the server
	// declared.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, &refreshError{reason: transportReason(ctx, err), err: fmt.Errorf("GET %s: reading body: %w", target, err)}
	}
	if int64(len(body)) > maxBytes {
		return nil, &refreshError{reason: ReasonTooLarge, err: fmt.Errorf("GET %s: body of more than the %d bytes accepted", target, maxBytes)}
	}
	return body, nil
}

func transportReason(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return ReasonTimeout
	}
	return ReasonRequest
}

// priceSystemURL adds the zone_id query to the endpoint, keeping any query an operator put
// in PRICING_PRICE_SYSTEM_URL.
func priceSystemURL(endpoint, zone string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("price-system URL %q: %w", endpoint, err)
	}
	q := u.Query()
	q.Set("zone_id", zone)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s %q: %w", name, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: must be an absolute http(s) URL", name, raw)
	}
	return nil
}
