package leadership_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/leadership"
)

// NewOperator mirrors core's NewOperator of one release: linked with another, it may miss what
// core changed there.
func TestMirrorsTheLinkedCoreRelease(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	for _, dep := range info.Deps {
		if dep.Path != "sigs.k8s.io/karpenter" {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if dep.Version != leadership.CoreVersion {
			t.Fatalf("linked with sigs.k8s.io/karpenter %s, NewOperator mirrors %s: carry over what changed in core's pkg/operator/operator.go NewOperator and setupIndexers, then set CoreVersion", dep.Version, leadership.CoreVersion)
		}
		return
	}
	t.Fatal("sigs.k8s.io/karpenter is not linked into the test binary")
}

// The inequalities the package documentation derives the timings from.
func TestTimings(t *testing.T) {
	const outage = 10 * time.Second
	requestTimeout := leadership.RenewDeadline / 2 // controller-runtime's, for the leader's client
	if stopped := leadership.RetryPeriod + leadership.RenewDeadline + requestTimeout; stopped >= leadership.LeaseDuration {
		t.Errorf("the leader may still lead %s after its last renewal was written, when a standby may take the lease after %s", stopped, leadership.LeaseDuration)
	}
	if refused := leadership.RenewDeadline - leadership.RetryPeriod; refused < 2*outage {
		t.Errorf("an apiserver refusing connections is ridden out for %s, not twice a %s outage", refused, outage)
	}
	if hung := requestTimeout - leadership.RetryPeriod; hung <= outage {
		t.Errorf("an apiserver whose connections hang is ridden out for %s, not a %s outage", hung, outage)
	}
}

// Core's copy of the controllers' rest.Config shares their HTTP/2 connection (client-go caches
// transports by TLS settings); Config's does not.
func TestConfigHasAConnectionOfItsOwn(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // User-Agent → protocol and client address
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.UserAgent()] = r.Proto + " " + r.RemoteAddr
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	base := &rest.Config{Host: srv.URL, UserAgent: "controllers"}
	base.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	coreCopy := rest.CopyConfig(base)
	coreCopy.UserAgent = "core-copy"
	ours := leadership.Config(base)
	ours.UserAgent = "leader-election"
	for _, c := range []*rest.Config{base, coreCopy, ours} {
		get(t, c, srv.URL)
	}

	mu.Lock()
	defer mu.Unlock()
	if seen["core-copy"] != seen["controllers"] {
		t.Fatalf("a plain copy no longer shares the controllers' connection (%q, %q): client-go's transport cache changed", seen["core-copy"], seen["controllers"])
	}
	if want := "HTTP/2.0 "; seen["controllers"][:len(want)] != want {
		t.Fatalf("the controllers' requests came as %q, not over HTTP/2", seen["controllers"])
	}
	if seen["leader-election"] == seen["controllers"] {
		t.Fatalf("leader election shares the controllers' connection: %q", seen["leader-election"])
	}
	if want := "HTTP/1.1 "; seen["leader-election"][:len(want)] != want {
		t.Fatalf("leader election's requests came as %q, not over HTTP/1.1", seen["leader-election"])
	}
}

func get(t *testing.T, c *rest.Config, url string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Fatalf("client for %s: %v", c.UserAgent, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", c.UserAgent)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET as %s: %v", c.UserAgent, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatal(fmt.Errorf("GET as %s: %s", c.UserAgent, resp.Status))
	}
}
