package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Startup is one start of the kube-apiserver by RestartAPIServer: from when the new process
// was started to when its /readyz first answered 200. In between it already serves requests,
// and its authorizer may deny them until its RBAC informers have synced, as a real
// kube-apiserver does: a load balancer that checks /readyz keeps clients away from it meanwhile,
// clients that reach it directly (here every one) see 403s.
type Startup struct {
	Started, Ready time.Time
}

// startups are RestartAPIServer's, in order.
type startups struct {
	mu   sync.Mutex
	list []Startup
}

func (s *startups) add(st Startup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, st)
}

func (s *startups) all() []Startup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Startup(nil), s.list...)
}

// APIServerStartups are the restarts of the kube-apiserver so far (RestartAPIServer).
func (cp *ControlPlane) APIServerStartups() []Startup { return cp.startups.all() }

// waitReady waits for the kube-apiserver's /readyz to answer 200, as admin.
func (cp *ControlPlane) waitReady(timeout time.Duration) error {
	hc, err := rest.HTTPClientFor(cp.config)
	if err != nil {
		return fmt.Errorf("client for /readyz: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	url := strings.TrimSuffix(cp.config.Host, "/") + "/readyz"
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("building the /readyz request: %w", err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready within %s: %w", timeout, last)
		case <-tick.C:
		}
	}
}
