package quotastate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	_ = e.Stop()
	os.Exit(code)
}

var (
	controlPlane = quota.Usage{CPU: 16, GB: 24}
	xl           = quota.Usage{CPU: 16, GB: 32}
	twoXS        = quota.Usage{CPU: 4, GB: 4}
)

func observe(tr *quota.Tracker) {
	tr.Record(quota.Observation{Usage: controlPlane, Proven: controlPlane, Groups: map[string]quota.Group{}})
}

// run starts a controller as the leader would, until the returned stop is called.
func run(g Gomega, ns string, tr *quota.Tracker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := quotastate.New(env.Client, env.Client, tr, ns, clock.RealClock{})
	go func() { done <- c.Start(ctx) }()
	return func() {
		cancel()
		g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	}
}

func saved(g Gomega, ns string) quota.Snapshot {
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotastate.ConfigMapName}, cm)).To(Succeed())
	var s quota.Snapshot
	g.Expect(json.Unmarshal([]byte(cm.Data[quotastate.KeySnapshot]), &s)).To(Succeed())
	g.Expect(cm.Data[quotastate.KeySummary]).To(ContainSubstring("refused use"))
	return s
}

func namespace(g Gomega, name string) string {
	g.Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// A leader that refused an XL saves what it learned; the next leader restores it before it
// launches anything, and so sends no probe into the XL's suspected leak.
func TestANewLeaderResumesFromTheSavedState(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(g, "resume")
	clk := clocktesting.NewFakeClock(time.Now())

	first := quota.NewTracker(clk, quota.Limit{})
	first.AwaitRestore()
	stopFirst := run(g, ns, first)
	observe(first)
	g.Eventually(func() quota.Admission { a, _ := first.Try("xl", xl); return a }).WithTimeout(10*time.Second).
		WithPolling(100*time.Millisecond).Should(Equal(quota.Admitted), "nothing saved yet: the first leader launches once it read so")
	first.Refused("xl", xl)
	g.Eventually(func(g Gomega) { g.Expect(saved(g, ns).Leaks).To(HaveLen(1)) }).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	stopFirst()

	next := quota.NewTracker(clk, quota.Limit{})
	next.AwaitRestore()
	observe(next)
	a, _ := next.Try("2xs", twoXS)
	g.Expect(a).To(Equal(quota.Busy), "a new leader launches nothing before it has read the saved state")
	stopNext := run(g, ns, next)
	defer stopNext()
	g.Eventually(func() quota.Admission { a, _ := next.Try("2xs", twoXS); return a }).WithTimeout(10*time.Second).
		WithPolling(100*time.Millisecond).Should(Equal(quota.NoRoom), "the XL's leak is still suspected: no probe")
	g.Expect(next.Blocked(xl)).To(BeTrue())
}

// A saved state that does not decode is not a reason to stop: the controller starts from what
// the cluster shows and writes a good state over it.
func TestAStateThatDoesNotDecodeIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(g, "corrupt")
	g.Expect(env.Client.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotastate.ConfigMapName},
		Data:       map[string]string{quotastate.KeySnapshot: "{not json"},
	})).To(Succeed())
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	tr.AwaitRestore()
	stop := run(g, ns, tr)
	defer stop()
	observe(tr)
	g.Eventually(func() quota.Admission { a, _ := tr.Try("xl", xl); return a }).WithTimeout(10 * time.Second).
		WithPolling(100 * time.Millisecond).Should(Equal(quota.Admitted))
	tr.Refused("xl", xl)
	g.Eventually(func(g Gomega) { g.Expect(saved(g, ns).Refused).To(HaveLen(1)) }).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}
