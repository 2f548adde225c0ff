package garbagecollection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

// remind replaces remindEvery in the test below: the recorder deduplicates on real time, and
// it must outlast the passes that check a group is not reported on each.
const remind = 10 * time.Second

// The other tests drive the suite's collector pass by pass; this one runs the real loop,
// registered in its own manager (for the informers) with a period no test will ever reach, so
// only the event path can fast-fail the claim or report a look-alike group.
func TestVanishedGroupIsFastFailedOnEventsNotThePeriod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	nc := env.NewClaim(g, class.Name)
	group := nodegroup.Build(nc, class, "S")
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	nc.Status.ProviderID = nodegroup.ProviderID(group.Name)
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	g.Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())

	mgr, err := env.NewManager()
	g.Expect(err).NotTo(HaveOccurred())
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := &namedRecorder{events: make(chan string, 100)}
	mgrCtx, cancel := context.WithCancel(ctx)
	collector := garbagecollection.New(mgr.GetClient(), mgr.GetAPIReader(), events.NewRecorder(recorder), clk, time.Hour)
	collector.SetRemind(remind)
	g.Expect(collector.Register(mgrCtx, mgr)).To(Succeed())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// The loop has made its first pass (the group was there) and is waiting: from now on only a
	// period (an hour away on a clock this test never moves that far) or a kick runs another.
	g.Eventually(clk.HasWaiters).WithTimeout(testenv.Wait).Should(BeTrue(), "the loop's first pass")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc)).To(Succeed())
	g.Expect(nc.DeletionTimestamp).To(BeNil(), "a claim whose group exists is left alone")

	g.Expect(env.Client.Delete(ctx, group)).To(Succeed())
	start := clk.Now()
	// Each poll moves the fake clock by a second to release the debounce; a polling budget of
	// at most testenv.Wait/interval seconds stays far below the period.
	g.Eventually(func() bool {
		clk.Step(time.Second)
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{}))
	}).WithTimeout(testenv.Wait).WithPolling(50*time.Millisecond).Should(BeTrue(), "the claim is deleted on the group's deletion event")
	g.Expect(clk.Since(start)).To(BeNumerically("<", time.Hour), "the period never elapsed")
	g.Expect(recorder.drain()).To(ContainElement(HavePrefix(cloudprovider.ReasonVanished + " " + nc.Name + ":")))

	// The group may be gone before the claim is marked launched: then no group deletion is left
	// to kick, and the claim's own update must.
	late := env.NewClaim(g, class.Name)
	late.Status.ProviderID = nodegroup.ProviderID(late.Name)
	late.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	g.Expect(env.Client.Status().Update(ctx, late)).To(Succeed())
	g.Eventually(func() bool {
		clk.Step(time.Second)
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(late), &karpv1.NodeClaim{}))
	}).WithTimeout(testenv.Wait).WithPolling(50*time.Millisecond).Should(BeTrue(), "the claim is deleted on its launched update")
	g.Expect(clk.Since(start)).To(BeNumerically("<", time.Hour), "the period never elapsed")

	// A hand-copied group (our labels, no owner) is reported as soon as it appears, and not
	// again on every pass its own updates kick, until remind has passed.
	copied := nodegroup.Build(env.NewClaim(g, class.Name), class, "S")
	copied.Name = testenv.Name("copied")
	delete(copied.Annotations, v1alpha1.AnnotationNodeClaimUID)
	created := time.Now() // the first report is published after this
	g.Expect(env.Client.Create(ctx, copied)).To(Succeed())
	refusals := func() int {
		n := 0
		for _, e := range recorder.drain() {
			if strings.HasPrefix(e, garbagecollection.ReasonRefused+" "+copied.Name+":") {
				n++
			}
		}
		return n
	}
	got := 0
	g.Eventually(func() int {
		clk.Step(time.Second)
		got += refusals()
		return got
	}).WithTimeout(testenv.Wait).WithPolling(50*time.Millisecond).Should(Equal(1), "the look-alike is reported on its creation event")
	touch := func(v string) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied)).To(Succeed())
		copied.Annotations = map[string]string{"example.com/touched": v}
		g.Expect(env.Client.Update(ctx, copied)).To(Succeed())
	}
	for _, v := range []string{"1", "2", "3"} {
		touch(v)
		// Each update kicks a pass; a second step lets its debounce fire.
		g.Eventually(clk.HasWaiters).WithTimeout(testenv.Wait).Should(BeTrue())
		clk.Step(time.Second)
		g.Eventually(clk.HasWaiters).WithTimeout(testenv.Wait).Should(BeTrue())
		clk.Step(time.Second)
	}
	g.Consistently(refusals).WithTimeout(500*time.Millisecond).Should(BeZero(), "no report per pass")
	g.Expect(time.Since(created)).To(BeNumerically("<", remind), "the passes above ran within remind of the report, or they prove nothing")
	// Once remind has passed, the next pass reports it again: each poll kicks one.
	got = 0
	touches := 4
	g.Eventually(func() int {
		touch(fmt.Sprint(touches))
		touches++
		clk.Step(time.Second)
		got += refusals()
		return got
	}).WithTimeout(remind+testenv.Wait).WithPolling(200*time.Millisecond).Should(Equal(1), "reported again after remind")
	g.Expect(clk.Since(start)).To(BeNumerically("<", time.Hour), "the period never elapsed")
	g.Expect(env.Client.Delete(ctx, copied)).To(Succeed())
}

// namedRecorder keeps "reason object: message" lines; record.FakeRecorder leaves the object's
// name out, and groups of other tests in the shared apiserver are reported too.
type namedRecorder struct{ events chan string }

var _ record.EventRecorder = (*namedRecorder)(nil)

func (r *namedRecorder) Event(obj runtime.Object, _, reason, message string) {
	name := ""
	if o, ok := obj.(metav1.Object); ok {
		name = o.GetName()
	}
	select {
	case r.events <- reason + " " + name + ": " + message:
	default:
	}
}

func (r *namedRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *namedRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

func (r *namedRecorder) drain() []string { return testenv.Drain(r.events) }
