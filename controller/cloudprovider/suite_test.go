package cloudprovider_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

type fixture struct {
	provider *cloudprovider.CloudProvider
	events   *record.FakeRecorder
	class    *v1alpha1.CleverNodeClass
	clock    *clocktesting.FakeClock
	quota    *quota.Tracker
	catalog  *catalog.Catalog
}

var seq atomic.Int32

// newFixture makes a provider on the real apiserver and a Ready CleverNodeClass unique to the test.
func newFixture(t *testing.T, g Gomega, timeout time.Duration) *fixture {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Load("", "par", testLogger(t))
	g.Expect(err).NotTo(HaveOccurred())
	rec := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(time.Now())
	groups := nodegroup.NewClient(env.Client, env.Client, env.Client)
	tracker := quota.NewTracker(clk, quota.Limit{})
	p := cloudprovider.New(env.Client, groups, cat, nil, tracker, events.NewRecorder(rec), clk, timeout)
	class := &v1alpha1.CleverNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("class-%d", seq.Add(1))},
		Spec:       v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{"team": "platform"}},
	}
	g.Expect(env.Client.Create(ctx, class)).To(Succeed())
	setReady(g, class, metav1.ConditionTrue)
	return &fixture{provider: p, events: rec, class: class, clock: clk, quota: tracker, catalog: cat}
}

func setReady(g Gomega, class *v1alpha1.CleverNodeClass, s metav1.ConditionStatus) {
	conds := class.StatusConditions()
	switch s {
	case metav1.ConditionTrue:
		conds.SetTrue(v1alpha1.ConditionValidationSucceeded)
		conds.SetTrue(v1alpha1.ConditionNodeGroupAPIServed)
	case metav1.ConditionFalse:
		conds.SetTrue(v1alpha1.ConditionValidationSucceeded)
		conds.SetFalse(v1alpha1.ConditionNodeGroupAPIServed, "NotServed", "no NodeGroup API")
	}
	g.Expect(env.Client.Status().Update(context.Background(), class)).To(Succeed())
}

// newClaim creates a NodeClaim in the apiserver, so it has a real UID to be owned by.
func (f *fixture) newClaim(g Gomega, cpu, memory string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("pool-%d", seq.Add(1)),
			Labels: map[string]string{karpv1.NodePoolLabelKey: "pool", "workload": "web", "kubernetes.io/arch": "amd64"},
		},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: f.class.Name},
			Requirements: append([]karpv1.NodeSelectorRequirementWithMinValues{{
				Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand},
			}}, reqs...),
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			}},
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	return nc
}

type result struct {
	Claim *karpv1.NodeClaim
	Err   error
}

// create runs Create in the background, as Karpenter's launch loop does.
func (f *fixture) create(nc *karpv1.NodeClaim) <-chan result {
	out := make(chan result, 1)
	go func() {
		c, err := f.provider.Create(context.Background(), nc)
		out <- result{c, err}
	}()
	return out
}

// awaitGroup waits for the provider to create the claim's NodeGroup.
func awaitGroup(g Gomega, name string) *ngv1.NodeGroup {
	group := &ngv1.NodeGroup{}
	g.Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Name: name}, group)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return group
}

// verdict plays the node-group operator: it writes a verdict into the group's status.
func verdict(g Gomega, group *ngv1.NodeGroup, phase string, conds ...metav1.Condition) {
	for i := range conds {
		conds[i].LastTransitionTime = metav1.Now()
	}
	group.Status.Phase = phase
	group.Status.Conditions = conds
	g.Expect(env.Client.Status().Update(context.Background(), group)).To(Succeed())
}

func accepted() metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", Message: "ok"}
}

func quotaExceeded(msg string) metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileFailed, Status: metav1.ConditionTrue, Reason: ngv1.ReasonQuotaExceeded, Message: msg}
}

func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
