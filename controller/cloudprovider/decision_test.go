package cloudprovider_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	provider "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Today's operator: the first status write (~1 s) is the decision.
func creating() metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileInProgress, Status: metav1.ConditionTrue, Reason: ngv1.ReasonCreating}
}

func failed(reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileFailed, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

// counter reads a counter (prometheus/testutil pulls a module go.mod does not require).
func counterValue(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	return pb.GetCounter().GetValue()
}

func offeredBy(g Gomega, p *provider.CloudProvider) map[string]bool {
	its, err := p.GetInstanceTypes(context.Background(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, it := range its {
		out[it.Name] = len(it.Offerings.Available()) > 0
	}
	return out
}

func TestCreateReturnsOnCreatingWithoutWaitingForTheVM(t *testing.T) {
	g := NewWithT(t)
	// A timeout far beyond the test's deadlines: only the decision can end the wait.
	f := newFixture(t, g, 10*time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	g.Consistently(done).WithTimeout(300 * time.Millisecond).ShouldNot(Receive())

	before := counterValue(provider.Launches.WithLabelValues("2XS", "Accepted"))
	verdict(g, group, ngv1.PhaseCreating, creating())
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(r.Claim.Status.ProviderID).To(Equal("clevercloud://"+nc.Name), "core's cluster state needs the provider ID now")
	g.Expect(counterValue(provider.Launches.WithLabelValues("2XS", "Accepted"))).To(Equal(before + 1))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), &ngv1.NodeGroup{})).To(Succeed())
	g.Expect(drainEvents(f.events)).To(BeEmpty())
}

func TestCreateLaunchesThroughATransientFailureAndSaysSo(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, ngv1.PhaseUpstreamError, creating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess"))
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(r.Claim.Status.ProviderID).To(Equal("clevercloud://" + nc.Name))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), &ngv1.NodeGroup{})).To(Succeed(), "nothing is deleted for a transient failure")
	g.Expect(drainEvents(f.events)).To(ConsistOf(SatisfyAll(ContainSubstring(provider.ReasonTransientFailure), ContainSubstring("RequestDidntReturnSuccess"))))
}

func TestAnUnknownFailureBeforeAcceptanceIsARefusal(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	nc := f.newClaim(g, "1", "1Gi") // 2XS
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, "Failed", failed("RegionClosed", "no capacity in par"))
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeTrue(), "got %v", r.Err)
	g.Expect(r.Err.Error()).To(ContainSubstring("RegionClosed"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), &ngv1.NodeGroup{}))
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(ContainSubstring(provider.ReasonRefused), ContainSubstring("RegionClosed"))))
	// Only the refused flavor is set aside: nothing says a larger one would fare the same.
	g.Expect(offeredBy(g, f.provider)).To(Equal(map[string]bool{"2XS": false, "XS": true, "S": true, "M": true, "L": true, "XL": true}))
}

func TestAnUnknownFailureAfterCreatingIsTransient(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, ngv1.PhaseCreating, creating(), failed("RegionClosed", "no capacity in par"))
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(drainEvents(f.events)).To(ConsistOf(ContainSubstring(provider.ReasonTransientFailure)))
}

// Today's quota refusal carries no message: the refusal still fails the launch at once.
func TestAQuotaRefusalWithAnEmptyMessageIsInsufficientCapacity(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, ngv1.PhaseQuotaExceeded, failed(ngv1.ReasonQuotaExceeded, ""))
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeTrue(), "got %v", r.Err)
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonQuotaExceeded)))
	g.Expect(offeredBy(g, f.provider)).To(HaveKeyWithValue("2XS", false))
}

// A flavor the served CRD's enum does not list is refused by the apiserver with a 422: the
// launch fails at once as InsufficientCapacity and the flavor is set aside, so the next plan
// takes another instead of hitting the same 422 again.
func TestAFlavorTheAPIServerRefusesIsSetAside(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	overrides := filepath.Join(t.TempDir(), "flavors.yaml")
	g.Expect(os.WriteFile(overrides, []byte("- {name: 2XL, cpu: 20, memoryKi: 40000000, nominalGB: 40, priceHourly: 0.001}\n"), 0o600)).To(Succeed())
	cat, err := catalog.Load(overrides, "par", testLogger(t))
	g.Expect(err).NotTo(HaveOccurred())
	p := provider.New(env.Client, nodegroup.NewClient(env.Client, env.Client, env.Client), cat, nil, f.quota, events.NewRecorder(f.events), f.clock, 10*time.Minute)

	nc := f.newClaim(g, "1", "1Gi")
	before := counterValue(provider.Launches.WithLabelValues("2XL", provider.OutcomeFlavorUnsupported))
	_, err = p.Create(context.Background(), nc) // the cheapest flavor by far: 2XL
	g.Expect(cloudprovider.IsInsufficientCapacityError(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.flavor"))
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Name: nc.Name}, &ngv1.NodeGroup{}))).To(BeTrue())
	g.Expect(counterValue(provider.Launches.WithLabelValues("2XL", provider.OutcomeFlavorUnsupported))).To(Equal(before + 1))
	g.Expect(drainEvents(f.events)).To(ConsistOf(SatisfyAll(ContainSubstring(provider.ReasonFlavorUnsupported), ContainSubstring("2XL"))))
	g.Expect(offeredBy(g, p)).To(HaveKeyWithValue("2XL", false))

	// Retried, the same claim gets the cheapest flavor the platform serves.
	done := make(chan result, 1)
	go func() { c, err := p.Create(context.Background(), nc); done <- result{c, err} }()
	group := awaitGroup(g, nc.Name)
	g.Expect(group.Spec.Flavor).To(Equal("2XS"))
	verdict(g, group, ngv1.PhaseCreating, creating())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))

	// The CRD changes only when Clever Cloud upgrades the cluster: what outlasts an
	// unclassified refusal's memory stays set aside.
	f.clock.Step(provider.RefusedTTL + time.Second)
	g.Expect(offeredBy(g, p)).To(HaveKeyWithValue("2XL", false))
	// The memory fades: a platform that starts serving the flavor gets asked again.
	f.clock.Step(provider.FlavorUnsupportedTTL - provider.RefusedTTL)
	g.Expect(offeredBy(g, p)).To(HaveKeyWithValue("2XL", true))
}

// RecordRefusal is how the launch follower records a refusal published after Create returned:
// exactly as Create would have.
func TestRecordRefusalBooksALateRefusalLikeAnEarlyOne(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	ctx := context.Background()
	nc := f.newClaim(g, "5", "6Gi") // XS
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, ngv1.PhaseCreating, creating())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))

	verdict(g, group, ngv1.PhaseQuotaExceeded, creating(), failed(ngv1.ReasonQuotaExceeded, ""))
	// The resource label is what the tracker inferred from this refusal and the proofs the
	// fixture's earlier launches left; the count is what must match an early refusal's.
	xsRefusals := func() float64 {
		n := 0.0
		for _, resource := range []string{"unknown", "RAM", "CPU"} {
			n += counterValue(provider.QuotaRejections.WithLabelValues("XS", resource))
		}
		return n
	}
	before := xsRefusals()
	f.provider.RecordRefusal(ctx, nc, group, nodegroup.Judge(group))
	g.Expect(xsRefusals()).To(Equal(before + 1))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(group), &ngv1.NodeGroup{}))).To(BeTrue())
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonQuotaExceeded)))
	g.Expect(offeredBy(g, f.provider)).To(HaveKeyWithValue("XS", false))

	// Anything but a refusal is not one: nothing is recorded, nothing deleted.
	other := f.newClaim(g, "1", "1Gi")
	kept := nodegroup.Build(other, f.class, "S")
	g.Expect(env.Client.Create(ctx, kept)).To(Succeed())
	verdict(g, kept, ngv1.PhaseCreating, creating())
	f.provider.RecordRefusal(ctx, other, kept, nodegroup.Judge(kept))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kept), &ngv1.NodeGroup{})).To(Succeed())
}

// retire rebuilds the fixture's provider on a catalogue without a flavor the NodeGroup API
// still serves: how a flavor leaves the catalogue while groups of it run (the served CRD's
// enum refuses a name outside it, so a group of an unknown name cannot be created).
func (f *fixture) retire(t *testing.T, g Gomega, flavor string) {
	t.Helper()
	base, err := catalog.LoadBase()
	g.Expect(err).NotTo(HaveOccurred())
	kept := base.Flavors[:0:0]
	for _, fl := range base.Flavors {
		if fl.Name != flavor {
			kept = append(kept, fl)
		}
	}
	g.Expect(kept).To(HaveLen(len(base.Flavors)-1), "flavor %s is not in the base catalogue", flavor)
	base.Flavors = kept
	f.catalog, err = catalog.New(base, "par", nil, testLogger(t))
	g.Expect(err).NotTo(HaveOccurred())
	f.provider = provider.New(env.Client, nodegroup.NewClient(env.Client, env.Client, env.Client), f.catalog, nil, f.quota, events.NewRecorder(f.events), f.clock, time.Minute)
}

// Deleting a node frees quota, not a flavor the apiserver or the operator refused: those stay
// set aside, or every node deletion and consolidation pass would send a launch of the cheaper
// refused flavor, and fail each replacement.
func TestADeleteDoesNotForgetRefusedFlavors(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, 10*time.Minute)
	ctx := context.Background()
	overrides := filepath.Join(t.TempDir(), "flavors.yaml")
	g.Expect(os.WriteFile(overrides, []byte("- {name: 2XL, cpu: 20, memoryKi: 40000000, nominalGB: 40, priceHourly: 0.001}\n"), 0o600)).To(Succeed())
	cat, err := catalog.Load(overrides, "par", testLogger(t))
	g.Expect(err).NotTo(HaveOccurred())
	p := provider.New(env.Client, nodegroup.NewClient(env.Client, env.Client, env.Client), cat, nil, f.quota, events.NewRecorder(f.events), f.clock, 10*time.Minute)

	// The apiserver refuses 2XL (422); the operator refuses a 2XS for a reason nobody knows.
	_, err = p.Create(ctx, f.newClaim(g, "1", "1Gi"))
	g.Expect(cloudprovider.IsInsufficientCapacityError(err)).To(BeTrue(), "got %v", err)
	refused := f.newClaim(g, "1", "1Gi")
	done := make(chan result, 1)
	go func() { c, err := p.Create(ctx, refused); done <- result{c, err} }()
	group := awaitGroup(g, refused.Name)
	g.Expect(group.Spec.Flavor).To(Equal("2XS"))
	verdict(g, group, "Failed", failed("RegionClosed", "no capacity in par"))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", Satisfy(cloudprovider.IsInsufficientCapacityError))))
	g.Expect(offeredBy(g, p)).To(SatisfyAll(HaveKeyWithValue("2XL", false), HaveKeyWithValue("2XS", false)))

	// A node of another flavor goes.
	nc := f.newClaim(g, "1", "1Gi")
	owned := nodegroup.Build(nc, f.class, "S")
	g.Expect(env.Client.Create(ctx, owned)).To(Succeed())
	nc.Status.ProviderID = nodegroup.ProviderID(owned.Name)
	g.Expect(p.Delete(ctx, nc)).To(Succeed())
	g.Expect(offeredBy(g, p)).To(SatisfyAll(HaveKeyWithValue("2XL", false), HaveKeyWithValue("2XS", false)),
		"a deleted node changes nothing about why these were refused")
}
