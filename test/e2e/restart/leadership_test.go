package restart

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/leadership"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// outageErrors are what the controllers log at error level while the apiserver is away:
// their requests refused, or cut when it is killed; and, once it is back, what it denies
// before its RBAC informers have synced (RunSuite's RBAC proof tells those from real gaps).
var outageErrors = []string{
	`connect: connection refused`,
	`connection reset by peer`,
	`http2: client connection lost`,
	`context deadline exceeded`,
	`is forbidden: User \\"system:serviceaccount:`,
}

// leaseRecord is the leader-election record of the Lease.
type leaseRecord struct {
	holder      string
	transitions int32
	acquired    time.Time
	renewed     time.Time
}

func readLease(g Gomega, s *harness.Scenario) leaseRecord {
	l := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Namespace: stack.SystemNamespace, Name: stack.LeaseName}, l)).To(Succeed())
	r := leaseRecord{}
	if l.Spec.HolderIdentity != nil {
		r.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		r.transitions = *l.Spec.LeaseTransitions
	}
	if l.Spec.AcquireTime != nil {
		r.acquired = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		r.renewed = l.Spec.RenewTime.Time
	}
	return r
}

// withStandby waits for the suite's controller to lead, then starts a standby beside it.
func withStandby(s *harness.Scenario) (leader, standby *stack.Controller) {
	leader = env.Controller()
	Eventually(leader.Leads).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(BeTrue(), "the suite's controller leads")
	standby = s.Replica(nil)
	expectRoles(leader, standby)
	return leader, standby
}

// expectRoles waits until leader says it leads and standby says it does not.
func expectRoles(leader, standby *stack.Controller) {
	Eventually(func(g Gomega) {
		g.Expect(leader.Leads()).To(BeTrue(), "the leader leads")
		g.Expect(standby.Leads()).To(BeFalse(), "the standby follows")
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// The kube-apiserver is killed and started again 10 s later, with a standby replica beside
// the leader: the leader keeps its lease, renewing it once the apiserver answers again; no
// replica exits, the standby never leads, and the leader provisions a pod afterwards. With
// controller-runtime's default timings, the only ones Karpenter core sets, the leader gave up
// after 10 to 12 s of failed renewals and exited.
func TestLeaderRidesOutATenSecondOutage(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(outageErrors...)
	leader, standby := withStandby(s)
	before := readLease(Default, s)

	down := time.Now()
	Expect(env.Cluster.RestartAPIServer(func() { <-time.After(10 * time.Second) })).To(Succeed())
	back := time.Now()
	t.Logf("apiserver away for %s", back.Sub(down).Round(100*time.Millisecond))

	Eventually(func(g Gomega) {
		if !leader.Running() {
			StopTrying("the leader exited: " + leader.Tail(20)).Now()
		}
		l := readLease(g, s)
		if l.holder != before.holder {
			StopTrying("another replica holds the lease").Now()
		}
		g.Expect(l.renewed).To(BeTemporally(">", back), "renewed since the apiserver came back")
	}).WithTimeout(leadership.RenewDeadline).WithPolling(200 * time.Millisecond).Should(Succeed())
	after := readLease(Default, s)
	t.Logf("renewed %s after the apiserver came back", after.renewed.Sub(back).Round(100*time.Millisecond))
	Expect(after.transitions).To(Equal(before.transitions), "no change of leader")
	Expect(after.acquired).To(BeTemporally("==", before.acquired), "the same tenure")
	Expect(leader.Running()).To(BeTrue(), "the leader runs")
	Expect(standby.Running()).To(BeTrue(), "the standby runs")
	expectRoles(leader, standby)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("after-outage", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
}

// The apiserver stays away until the leader gives up, which it must, past its renew deadline.
// It tries for the whole deadline after its last renewal, then exits while that renewal still
// holds the lease; the standby takes over only once the lease has run out, after the old
// leader is gone: at no moment do two processes lead.
func TestLeaderPastItsDeadlineExitsBeforeAnotherLeads(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(outageErrors...)
	s.AllowErrors(`leader election lost`)
	leader, standby := withStandby(s)
	before := readLease(Default, s)

	gaveUp := false
	Expect(env.Cluster.RestartAPIServer(func() {
		// A leader that does not give up before its lease runs out fails below.
		select {
		case <-leader.Done():
			gaveUp = true
		case <-time.After(leadership.LeaseDuration):
		}
	})).To(Succeed())
	Expect(gaveUp).To(BeTrue(), "the leader gave up while the apiserver was away")
	leader.ExitWasExpected()
	exited := leader.ExitedAt()
	t.Logf("leader exited (%v)", leader.ExitErr())

	// Nobody could write the Lease since the apiserver came back but the standby, and the
	// standby may not take it yet: it holds the old leader's last renewal.
	last := readLease(Default, s)
	Expect(last.holder).To(Equal(before.holder), "the old leader's lease, right after the apiserver came back")
	Expect(last.transitions).To(Equal(before.transitions))
	t.Logf("last renewal, leader exit %s later", exited.Sub(last.renewed).Round(100*time.Millisecond))
	Expect(exited.Sub(last.renewed)).To(BeNumerically(">=", leadership.RenewDeadline), "the leader tried for its whole renew deadline")
	Expect(exited).To(BeTemporally("<", last.renewed.Add(leadership.LeaseDuration)), "the leader exited while its lease still stood")

	Eventually(standby.Leads).WithTimeout(leadership.LeaseDuration+leadership.RenewDeadline).WithPolling(200*time.Millisecond).
		Should(BeTrue(), "the standby leads once the lease has run out")
	taken := readLease(Default, s)
	t.Logf("standby took the lease %s after the last renewal", taken.acquired.Sub(last.renewed).Round(100*time.Millisecond))
	Expect(taken.holder).NotTo(Equal(before.holder))
	Expect(taken.transitions).To(Equal(before.transitions+1), "one change of leader")
	Expect(taken.acquired).To(BeTemporally(">=", last.renewed.Add(leadership.LeaseDuration)), "the standby waited out the lease")
	Expect(taken.acquired).To(BeTemporally(">", exited), "after the old leader was gone")

	// The suite's controller back, as the standby; the replica's graceful stop hands it the lease.
	s.RestartController(nil)
	Expect(standby.Stop()).To(Succeed())
	Eventually(env.Controller().Leads).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeTrue())
}
