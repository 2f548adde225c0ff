package leadership_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/leadership"
)

// The inequalities the package documentation derives the timings from.
func TestTimings(t *testing.T) {
	const outage = 10 * time.Second
	requestTimeout := leadership.Config(&rest.Config{}, leadership.DefaultTimings).Timeout
	if requestTimeout != leadership.RenewDeadline/2 {
		t.Fatalf("the leader's request timeout is %s, not half the renew deadline", requestTimeout)
	}
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

// A plain copy of the controllers' rest.Config shares their HTTP/2 connection (client-go caches
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
	plain := rest.CopyConfig(base)
	plain.UserAgent = "plain-copy"
	ours := leadership.Config(base, leadership.DefaultTimings)
	if !strings.HasSuffix(ours.UserAgent, "leader-election") {
		t.Errorf("the leader's requests say they come from %q", ours.UserAgent)
	}
	if base.Timeout != 0 || len(base.NextProtos) != 0 {
		t.Errorf("Config changed the controllers' rest.Config: timeout %s, protocols %v", base.Timeout, base.NextProtos)
	}
	for _, c := range []*rest.Config{base, plain, ours} {
		get(t, c, srv.URL)
	}

	mu.Lock()
	defer mu.Unlock()
	if seen["plain-copy"] != seen["controllers"] {
		t.Fatalf("a plain copy no longer shares the controllers' connection (%q, %q): client-go's transport cache changed", seen["plain-copy"], seen["controllers"])
	}
	if want := "HTTP/2.0 "; !strings.HasPrefix(seen["controllers"], want) {
		t.Fatalf("the controllers' requests came as %q, not over HTTP/2", seen["controllers"])
	}
	if seen[ours.UserAgent] == seen["controllers"] {
		t.Fatalf("leader election shares the controllers' connection: %q", seen[ours.UserAgent])
	}
	if want := "HTTP/1.1 "; !strings.HasPrefix(seen[ours.UserAgent], want) {
		t.Fatalf("leader election's requests came as %q, not over HTTP/1.1", seen[ours.UserAgent])
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

// The identity is the pod's host name, as the status command reads it back, and a UID that
// tells a restarted container from the one before.
func TestIdentity(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	a, err := leadership.Identity()
	if err != nil {
		t.Fatal(err)
	}
	b, err := leadership.Identity()
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := strings.Cut(a, "_"); name != host {
		t.Errorf("identity %q does not start with the host name %q and _", a, host)
	}
	if a == b {
		t.Errorf("two identities are both %q", a)
	}
}

const (
	namespace = "karpenter"
	leaseName = "karpenter-leader-election"
)

// fast are timings short enough for a test: a standby waits 2 s for a lease nobody renews.
var fast = leadership.Timings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}

func election(cs *fake.Clientset, identity string) *leadership.Election {
	return &leadership.Election{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: leaseName},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		Name:    leaseName,
		Timings: fast,
	}
}

func holder(g Gomega, cs *fake.Clientset) string {
	l, err := cs.CoordinationV1().Leases(namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// masterStatus is leader_election_master_status for the Lease, as /metrics serves it.
func masterStatus(g Gomega) float64 {
	fams, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range fams {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == leaseName {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	g.Expect("leader_election_master_status").To(BeEmpty(), "not exposed for %s", leaseName)
	return -1
}

// runElection runs e in the background; the channel receives Run's result.
func runElection(ctx context.Context, e *leadership.Election, lead func(context.Context)) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, lead) }()
	return done
}

// SIGTERM stops the operator first and only then releases the Lease, so that the next replica
// leads at once and never beside a leader still at work.
func TestSIGTERMReleasesTheLeaseOnceTheOperatorStopped(t *testing.T) {
	g := NewWithT(t)
	cs := fake.NewClientset()
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	leading := make(chan context.Context, 1)
	finish := make(chan struct{})
	done := runElection(ctx, election(cs, "a"), func(ctx context.Context) {
		leading <- ctx
		<-ctx.Done()
		<-finish // the operator stopping
	})

	var leadCtx context.Context
	g.Eventually(leading).WithTimeout(10 * time.Second).Should(Receive(&leadCtx))
	g.Expect(holder(g, cs)).To(Equal("a"))
	g.Expect(masterStatus(g)).To(Equal(1.0))

	sigterm()
	g.Eventually(leadCtx.Done()).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Consistently(func(g Gomega) {
		g.Expect(done).NotTo(Receive(), "Run returned before the operator stopped")
		g.Expect(holder(g, cs)).To(Equal("a"), "the Lease was released before the operator stopped")
	}).WithTimeout(3 * fast.RetryPeriod).WithPolling(fast.RetryPeriod / 4).Should(Succeed())

	close(finish)
	var err error
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holder(g, cs)).To(BeEmpty(), "released")
}

// A standby waits while another holds the Lease, reporting that it does not lead, and SIGTERM
// ends the wait without touching the Lease.
func TestStandbyWaitsAndStopsOnSIGTERM(t *testing.T) {
	g := NewWithT(t)
	other := "b"
	now := metav1.NewMicroTime(time.Now())
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &other, LeaseDurationSeconds: new(int32(3600)), AcquireTime: &now, RenewTime: &now,
		},
	})
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	var led atomic.Bool
	done := runElection(ctx, election(cs, "a"), func(context.Context) { led.Store(true) })

	// The registry is the process's: another test's leader may have left 1 until this election
	// starts.
	g.Eventually(masterStatus).WithTimeout(10 * time.Second).Should(Equal(0.0))
	g.Consistently(func(g Gomega) {
		g.Expect(masterStatus(g)).To(Equal(0.0))
		g.Expect(holder(g, cs)).To(Equal(other))
		g.Expect(done).NotTo(Receive())
	}).WithTimeout(5 * fast.RetryPeriod).WithPolling(fast.RetryPeriod / 2).Should(Succeed())

	sigterm()
	var err error
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(led.Load()).To(BeFalse(), "a standby ran the operator")
	g.Expect(holder(g, cs)).To(Equal(other))
}

// Renewals that fail for the renew deadline end the leadership: Run says the Lease is lost so
// that the process exits, and leaves the Lease to run out rather than release it under an
// operator that may still be at work, even when the apiserver takes the release.
func TestALostLeaseIsNotReleased(t *testing.T) {
	g := NewWithT(t)
	cs := fake.NewClientset()
	var away atomic.Bool
	// Renewals fail while away; a release (no holder) would go through.
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l, ok := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if away.Load() && ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return true, nil, errors.New("apiserver too busy")
		}
		return false, nil, nil
	})
	leading := make(chan context.Context, 1)
	done := runElection(context.Background(), election(cs, "a"), func(ctx context.Context) {
		leading <- ctx
		<-ctx.Done()
	})
	var leadCtx context.Context
	g.Eventually(leading).WithTimeout(10 * time.Second).Should(Receive(&leadCtx))

	lost := time.Now()
	away.Store(true)
	var err error
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(leadership.ErrLeaseLost))
	g.Expect(time.Since(lost)).To(BeNumerically(">=", fast.RenewDeadline), "tried for the whole renew deadline")
	g.Expect(holder(g, cs)).To(Equal("a"), "the lost Lease was released")
	g.Expect(masterStatus(g)).To(Equal(0.0))
	g.Eventually(leadCtx.Done()).WithTimeout(10 * time.Second).Should(BeClosed())
}

// The standby answers its probes and serves its metrics, and hands each port over on its own.
func TestStandbyServesUntilItHandsThePortsOver(t *testing.T) {
	g := NewWithT(t)
	healthAddr, metricsAddr := freeAddr(t), freeAddr(t)
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "standby_test_gauge"})
	reg.MustRegister(gauge)
	gauge.Set(1)

	s, err := leadership.ServeStandby(testr.New(t), healthAddr, metricsAddr, reg)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(s.Close()).To(Succeed()) }()
	for _, path := range []string{"/healthz", "/readyz"} {
		g.Expect(body(g, "http://"+healthAddr+path)).To(Equal("ok"), path)
	}
	g.Expect(body(g, "http://"+metricsAddr+"/metrics")).To(ContainSubstring("standby_test_gauge 1"))

	g.Expect(s.ReleaseHealthPort()).To(Succeed())
	bindable(g, healthAddr)
	g.Expect(body(g, "http://"+metricsAddr+"/metrics")).To(ContainSubstring("standby_test_gauge 1"), "metrics served until their own hand-over")
	g.Expect(s.ReleaseMetricsPort()).To(Succeed())
	bindable(g, metricsAddr)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func bindable(g Gomega, addr string) {
	l, err := net.Listen("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred(), "port %s not handed over", addr)
	g.Expect(l.Close()).To(Succeed())
}

func body(g Gomega, url string) string {
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), url)
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}
