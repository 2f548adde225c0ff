package pricing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

func TestFetchLimits(t *testing.T) {
	const limit = 64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ua := r.Header.Get("User-Agent"); ua != version.UserAgent() {
			http.Error(w, "bad user agent "+ua, http.StatusBadRequest)
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		body := strings.Repeat("x", n)
		switch r.URL.Path {
		case "/declared":
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write([]byte(body))
		case "/chunked":
			// Flushing before the end forces chunked encoding: no length is declared.
			_, _ = w.Write([]byte(body[:n/2]))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(body[n/2:]))
		case "/redirect":
			http.Redirect(w, r, "/declared?n=1", http.StatusFound)
		case "/created":
			w.WriteHeader(http.StatusCreated)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, tt := range []struct {
		path   string
		reason string // empty: accepted
	}{
		{"/declared?n=64", ""},
		{"/chunked?n=64", ""},
		{"/declared?n=65", ReasonTooLarge},
		{"/chunked?n=65", ReasonTooLarge},
		{"/redirect", ""},
		{"/created", ReasonStatus},
		{"/missing", ReasonStatus},
	} {
		body, err := fetch(ctx, srv.Client(), srv.URL+tt.path, 5*time.Second, limit)
		if tt.reason == "" {
			if err != nil || len(body) == 0 {
				t.Errorf("%s: %d bytes, %v", tt.path, len(body), err)
			}
			continue
		}
		if re := classify("", err); err == nil || re.reason != tt.reason {
			t.Errorf("%s: error %v, want reason %s", tt.path, err, tt.reason)
		}
	}
	if _, err := fetch(ctx, srv.Client(), "http://127.0.0.1:1/nothing", 5*time.Second, limit); err == nil || classify("", err).reason != ReasonRequest {
		t.Errorf("unreachable endpoint: %v", err)
	}
}
