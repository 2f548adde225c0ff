// Package leadership is the provider's own leader election: it takes Karpenter core's leader
// Lease with timings that let the leader ride out a short apiserver outage, or an apiserver too
// loaded to answer its renewals for a while, without losing its lease and exiting, and runs
// core's operator, built by core's own operator.NewOperator with core's election turned off,
// only while it holds that Lease.
//
// Core's operator.NewOperator builds the controller-runtime manager itself and lets a provider
// set only the Lease's labels and the rest.Config leader election talks with: the lease's
// duration, renew deadline and retry period stay at controller-runtime's defaults (15 s, 10 s,
// 2 s). With those the leader gives up, and the process exits, once its renewals have failed
// for 10 to 12 s: a 10-s outage plus the time a restarted apiserver takes to answer is already
// too long. No rest.Config can lengthen that deadline. So the controller asks core for no
// election (DISABLE_LEADER_ELECTION, which a manager without election starts everything at
// once under) and elects itself with client-go's leaderelection on the same Lease, the same
// name and namespace core would use, so that the bundle's Role and FlowSchema cover it
// unchanged and replicas of an older release, elected by core, compete for the same object.
// Core's operator is built and started only once the Lease is held; until then the process
// answers its health probes and serves its metrics itself (Standby).
//
// # The timings
//
// The leader renews every RetryPeriod. When a renewal fails it keeps trying, every RetryPeriod,
// for RenewDeadline; then it stops leading and the process exits. A standby takes the lease
// once LeaseDuration has passed since it last saw the Lease change.
//
//   - Outage ridden out: an apiserver that refuses connections (a restart) costs nothing as long
//     as it answers again within RenewDeadline − RetryPeriod of the last renewal (28 s); one whose
//     connections hang makes each attempt wait out its request timeout, RenewDeadline/2 (which
//     Config sets), so there it is RenewDeadline/2 − RetryPeriod (13 s). Both cover a 10-s
//     outage with room for the apiserver's own restart.
//   - Never two leaders: a renewal that succeeded may have answered up to its timeout,
//     RenewDeadline/2, after the apiserver wrote it, and a standby counts LeaseDuration from
//     that write at the earliest. The leader stops trying RetryPeriod + RenewDeadline after the
//     answer, so it has stopped leading RetryPeriod + RenewDeadline + RenewDeadline/2 (47 s)
//     after the write, before LeaseDuration (60 s) lets anyone else lead; the rest is what the
//     process takes to exit. A leader that lost its Lease does not hand it over early either:
//     the Lease is released only once the operator has returned (Run), never while it may still
//     be working. The standby reads the duration from the Lease, so replicas of an older
//     release, with other timings, wait out ours and we wait out theirs.
//   - What it costs: a leader that dies without releasing its lease (SIGKILL, OOM, a lost node)
//     is replaced after up to LeaseDuration + RetryPeriod instead of 17 s; nothing provisions or
//     disrupts meanwhile. A rolling update releases the lease on SIGTERM once the operator has
//     stopped, so the next replica still leads within RetryPeriod. A standby builds core's
//     operator only once it leads, so it starts its caches then (core's controller warm-up,
//     off by default, cannot fill them earlier without core's own election). RetryPeriod stays
//     at 2 s: one small write every 2 s is nothing to the apiserver, and it bounds that
//     handover.
//
// # The leader's connection
//
// A rest.Config copied from the controllers' one still shares their HTTP/2 connection, because
// client-go caches transports by TLS settings: renewals would queue behind the controllers'
// watches and lists on one TCP connection and its flow-control window, and a connection that
// hangs would hang them all. Config gives leader election an HTTP/1.1 connection of its own and
// a request timeout, so that a renewal that times out closes its connection and the next
// attempt dials afresh. On the apiserver's side the bundle's FlowSchema puts the Lease in the
// leader-election priority level.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	// Reports client-go's leader election as leader_election_master_status in controller-runtime's
	// registry, which core's manager and Standby serve.
	_ "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The leader-election timings; the package documentation says why these.
const (
	LeaseDuration = 60 * time.Second
	RenewDeadline = 30 * time.Second
	RetryPeriod   = 2 * time.Second
)

// Timings are an election's lease duration, renew deadline and retry period.
type Timings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultTimings are the package's constants; tests elect with shorter ones.
var DefaultTimings = Timings{LeaseDuration: LeaseDuration, RenewDeadline: RenewDeadline, RetryPeriod: RetryPeriod}

// ErrLeaseLost is what Run returns when the leader could not renew its Lease: the process must
// exit, as the operator may not go on working without it.
var ErrLeaseLost = errors.New("leader election lost")

// inClusterNamespacePath is where a pod finds its namespace, the Lease's when nothing names one.
const inClusterNamespacePath = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Lease names the Lease the replicas compete for.
type Lease struct {
	Namespace, Name string
}

// CoreLease is the Lease core would elect on: name is its LEADER_ELECTION_NAME option and
// namespace its LEADER_ELECTION_NAMESPACE, else systemNamespace (SYSTEM_NAMESPACE, the
// controller's namespace in the bundle), else the pod's own namespace, as controller-runtime
// falls back to.
func CoreLease(name, namespace, systemNamespace string) (Lease, error) {
	return leaseIn(name, namespace, systemNamespace, inClusterNamespacePath)
}

func leaseIn(name, namespace, systemNamespace, podNamespacePath string) (Lease, error) {
	if name == "" {
		return Lease{}, errors.New("no leader-election Lease name (LEADER_ELECTION_NAME)")
	}
	for _, ns := range []string{namespace, systemNamespace} {
		if ns != "" {
			return Lease{Namespace: ns, Name: name}, nil
		}
	}
	b, err := os.ReadFile(podNamespacePath)
	if err != nil {
		return Lease{}, fmt.Errorf("no namespace for the leader-election Lease %s: set LEADER_ELECTION_NAMESPACE or SYSTEM_NAMESPACE out of a cluster (%w)", name, err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return Lease{}, fmt.Errorf("no namespace for the leader-election Lease %s: %s is empty", name, podNamespacePath)
	}
	return Lease{Namespace: ns, Name: name}, nil
}

// Identity names this process in the Lease: its host name, which is the pod's, and a UID, so
// that a restarted container is another holder, as core's identities are.
func Identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader-election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// Config is the rest.Config leader election talks with: base's endpoint and credentials, on an
// HTTP/1.1 connection of its own, each request timed out after half the renew deadline.
func Config(base *rest.Config, t Timings) *rest.Config {
	c := rest.CopyConfig(base)
	// Transports are cached by TLS settings, NextProtos among them: another value is another
	// transport, and leaving h2 out keeps a timed-out request from leaving a dead connection
	// behind for the next one.
	c.NextProtos = []string{"http/1.1"}
	// Two attempts fit in the renew deadline even when connections hang.
	c.Timeout = t.RenewDeadline / 2
	// A limiter of its own: the controllers' client-side rate limit never delays a renewal.
	c.RateLimiter = nil
	return rest.AddUserAgent(c, "leader-election")
}

// Election is leader election on one Lease.
type Election struct {
	// Lock is the Lease as this process holds it.
	Lock resourcelock.Interface
	// Name labels leader_election_master_status: the Lease's name, as core's manager labels it.
	Name    string
	Timings Timings
}

// New is an election on lease as identity, through Config(base, t).
func New(lease Lease, identity string, base *rest.Config, t Timings) (*Election, error) {
	cs, err := kubernetes.NewForConfig(Config(base, t))
	if err != nil {
		return nil, fmt.Errorf("leader-election client: %w", err)
	}
	return &Election{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: lease.Namespace, Name: lease.Name},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		Name:    lease.Name,
		Timings: t,
	}, nil
}

// Run takes the Lease, waiting for it as long as another process holds it, then calls lead
// and renews the Lease until lead returns. lead's context is cancelled when ctx is (SIGTERM)
// or when a renewal has failed for the whole renew deadline.
//
// Run returns nil once ctx is cancelled and, if this process led, lead has returned and the
// Lease has been released for the next replica to lead at once. It returns ErrLeaseLost,
// without waiting for lead, when the Lease could not be renewed: the caller must exit then,
// before the Lease runs out. Run logs with ctx's logger.
func (e *Election) Run(ctx context.Context, lead func(context.Context)) error {
	logger := logr.FromContextOrDiscard(ctx)
	lock := &releaseGuard{Interface: e.Lock}
	// The election ends when Run says so, not when ctx does: a leader's Lease is given up only
	// after the operator has returned.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()

	var mu sync.Mutex
	leading := false
	// SIGTERM: a standby stops waiting for the Lease at once; a leader once lead has returned.
	stopWatching := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			stopElection()
		}
	})
	defer stopWatching()

	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          e.Name,
		LeaseDuration: e.Timings.LeaseDuration,
		RenewDeadline: e.Timings.RenewDeadline,
		RetryPeriod:   e.Timings.RetryPeriod,
		// Released once the operator has stopped (releaseGuard), so that a rolling update hands
		// over within a retry period instead of a lease duration.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				mu.Lock()
				if ctx.Err() != nil {
					// SIGTERM came as the Lease was taken: the watcher ends the election and
					// the Lease is released without anything having run under it.
					mu.Unlock()
					lock.mayRelease.Store(true)
					stopElection()
					return
				}
				leading = true
				mu.Unlock()
				logger.Info("leading", "lease", lock.Describe(), "identity", lock.Identity())
				runCtx, cancel := context.WithCancel(leaseCtx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				lead(runCtx)
				// Nothing works under the Lease any more: give it up.
				lock.mayRelease.Store(true)
				stopElection()
			},
			OnStoppedLeading: func() {
				// Only a stop Run asked for ends here quietly; on a lost Lease Run returns
				// ErrLeaseLost and its caller exits non-zero, as controller-runtime's manager
				// does.
				if electionCtx.Err() != nil {
					logger.Info("stopped leader election", "lease", lock.Describe())
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election on %s: %w", lock.Describe(), err)
	}
	logger.Info("waiting for the leader Lease", "lease", lock.Describe(), "identity", lock.Identity(),
		"leaseDuration", e.Timings.LeaseDuration, "renewDeadline", e.Timings.RenewDeadline, "retryPeriod", e.Timings.RetryPeriod)
	le.Run(electionCtx)
	if electionCtx.Err() == nil {
		return fmt.Errorf("%w: the Lease %s was not renewed within %s", ErrLeaseLost, lock.Describe(), e.Timings.RenewDeadline)
	}
	return nil
}

// releaseGuard is the Lease lock, except that it does not release the Lease (client-go writes
// an empty holder) until Run allows it: client-go releases it whenever renewing stops, also
// when renewals failed and the operator may still be at work, and a standby would then lead
// beside it.
type releaseGuard struct {
	resourcelock.Interface
	mayRelease atomic.Bool
}

func (g *releaseGuard) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == "" && !g.mayRelease.Load() {
		return fmt.Errorf("%w: the Lease is left to run out, as the operator may still be running", ErrLeaseLost)
	}
	// Unwrapped: client-go tells a conflict by the apiserver's status, and logs the lock with it.
	return g.Interface.Update(ctx, r)
}
