package inspect

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	cp "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func readyClass(name string) v1alpha1.CleverNodeClass {
	nc := v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cs := nc.StatusConditions()
	cs.SetTrue(v1alpha1.ConditionValidationSucceeded)
	cs.SetTrue(v1alpha1.ConditionNodeGroupAPIServed)
	cs.SetTrueWithReason(v1alpha1.ConditionPricesCurrent, "Refreshed", "prices refreshed at 2026-12-03T11:00:00Z")
	return nc
}

func pool(name string, flavors []string, limits corev1.ResourceList) karpv1.NodePool {
	np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: v1alpha1.NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: flavors}}
	np.Spec.Limits = karpv1.Limits(limits)
	return np
}

func pod(name, poolName, cpu string, selector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: selector,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{poolName}}}}},
			}}},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
			}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func event(reason, component string, kind, ns, name, msg string, at time.Time) corev1.Event {
	return corev1.Event{
		Reason: reason, Message: msg, Source: corev1.EventSource{Component: component},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
		LastTimestamp:  metav1.NewTime(at),
	}
}

// state is a cluster with a configured quota of 40 vCPU / 36 GB, 20 / 28 of it in use: 20 vCPU
// and 8 GB of headroom, room for a 2XS (4 / 4) or an XS (6 / 8), not for an S (8 / 12).
func state(t *testing.T) *State {
	base, err := catalog.LoadBase()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(base, "par", nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	limit := quota.Limit{CPU: 40, GB: 36}
	return &State{
		Now: now, Namespace: "karpenter", Catalog: cat, Errors: map[string]error{},
		NodeClasses: []v1alpha1.CleverNodeClass{readyClass("default")},
		NodePools: []karpv1.NodePool{
			pool("all", []string{"2XS", "XS", "S", "M", "L", "XL"}, nil),
			pool("capped", []string{"2XS", "XS"}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}),
			pool("open", []string{"2XS", "XS"}, nil),
		},
		Snapshot: &quota.Snapshot{SavedAt: now.Add(-time.Minute), Configured: limit, Limit: limit, Sure: quota.Usage(limit)},
		Used:     &quota.Usage{CPU: 20, GB: 28},
	}
}

func flavorOf(e Explanation, poolName, flavor string) FlavorVerdict {
	for _, p := range e.Pools {
		if p.Name != poolName {
			continue
		}
		for _, f := range p.Flavors {
			if f.Name == flavor {
				return f
			}
		}
	}
	return FlavorVerdict{Name: "absent"}
}

func poolOf(e Explanation, name string) PoolVerdict {
	for _, p := range e.Pools {
		if p.Name == name {
			return p
		}
	}
	return PoolVerdict{Name: "absent"}
}

func TestASchedulablePodGetsTheCheapestFlavorOfItsPool(t *testing.T) {
	g := NewWithT(t)
	e := Explain(state(t), pod("web", "open", "1", nil))
	g.Expect(flavorOf(e, "open", "2XS").Excluded).To(BeEmpty())
	g.Expect(flavorOf(e, "open", "XS").Excluded).To(BeEmpty())
	g.Expect(flavorOf(e, "open", "S").Excluded).To(ConsistOf(HavePrefix(ExcludedByPool + ": not allowed by the NodePool")))
	// The pod's affinity holds it to its pool: the others are excluded as a whole.
	g.Expect(poolOf(e, "all").Excluded).To(HavePrefix(ExcludedByRequirements + ": the pod's do not meet the NodePool's: key karpenter.sh/nodepool"))
	g.Expect(e.Cheapest).To(Equal(&Choice{Pool: "open", Flavor: "2XS", PriceHourly: 0.0333}))
	g.Expect(e.CheapestBeyondQuota).To(BeNil())
	var b bytes.Buffer
	g.Expect(WriteExplanation(&b, e)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("Could hold it: open (2XS, XS)\n"))
	g.Expect(b.String()).To(ContainSubstring("Cheapest new node: 2XS in NodePool open, 0.0333 EUR/h\n"))
	g.Expect(b.String()).To(ContainSubstring("  not allowed by the NodePool's requirements: S, M, L, XL\n"))
}

// Karpenter tries the heaviest pools first: the cheapest node is the cheapest of the heaviest
// pool that can hold the pod, and a cheaper flavor the quota keeps out of a lighter pool is not
// worth naming.
func TestTheHeaviestPoolComesFirst(t *testing.T) {
	g := NewWithT(t)
	s := state(t)
	heavy := pool("heavy", []string{"XS"}, nil)
	heavy.Spec.Weight = ptr.To[int32](10)
	s.NodePools = append(s.NodePools, heavy)
	p := pod("web", "open", "1", nil)
	p.Spec.Affinity = nil
	e := Explain(s, p)
	g.Expect(e.Cheapest).To(Equal(&Choice{Pool: "heavy", Flavor: "XS", PriceHourly: 0.0611, weight: 10}))
	g.Expect(e.CheapestBeyondQuota).To(BeNil())
	g.Expect(poolOf(e, "heavy").Weight).To(Equal(int32(10)))
}

func TestAPoolAtItsLimitsHoldsNothing(t *testing.T) {
	g := NewWithT(t)
	e := Explain(state(t), pod("capped", "capped", "1", nil))
	g.Expect(flavorOf(e, "capped", "2XS").Excluded).To(ConsistOf(ExcludedByLimits + ": a 2XS would exceed the NodePool's limits: it adds cpu 4, 2 left"))
	g.Expect(flavorOf(e, "capped", "XS").Excluded).To(ConsistOf(ExcludedByLimits + ": a XS would exceed the NodePool's limits: it adds cpu 6, 2 left"))
	g.Expect(e.Cheapest).To(BeNil())
	var b bytes.Buffer
	g.Expect(WriteExplanation(&b, e)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("Could hold it: no NodePool and flavor now\n"))
}

func TestTheQuotaRulesOutTheFlavorsAPodNeeds(t *testing.T) {
	g := NewWithT(t)
	e := Explain(state(t), pod("big", "all", "9", nil))
	g.Expect(flavorOf(e, "all", "S").Excluded).To(ConsistOf(
		HavePrefix(ExcludedByResources+": the pod requests cpu 9, memory 1.0Gi, a S has cpu 8"),
		"quota: charges 8 vCPU / 12 GB, beyond the headroom 20 vCPU / 8 GB (limit 40 vCPU / 36 GB, in use 20 vCPU / 28 GB)",
	))
	g.Expect(flavorOf(e, "all", "M").Excluded).To(ConsistOf("quota: charges 10 vCPU / 16 GB, beyond the headroom 20 vCPU / 8 GB (limit 40 vCPU / 36 GB, in use 20 vCPU / 28 GB)"))
	g.Expect(e.Cheapest).To(BeNil())
	g.Expect(e.CheapestBeyondQuota).To(Equal(&Choice{Pool: "all", Flavor: "M", PriceHourly: 0.1167}))
}

func TestAFlavorThePoolDoesNotAllow(t *testing.T) {
	g := NewWithT(t)
	e := Explain(state(t), pod("large", "open", "1", map[string]string{corev1.LabelInstanceTypeStable: "L"}))
	g.Expect(poolOf(e, "open").Excluded).To(Equal(ExcludedByRequirements + ": the pod's do not meet the NodePool's: key node.kubernetes.io/instance-type, node.kubernetes.io/instance-type In [L] not in node.kubernetes.io/instance-type In [2XS XS]"))
	g.Expect(e.Cheapest).To(BeNil())
}

func TestAClassNotReadyExcludesItsPools(t *testing.T) {
	g := NewWithT(t)
	s := state(t)
	s.NodeClasses[0].StatusConditions().SetFalse(v1alpha1.ConditionNodeGroupAPIServed, "NotServed", "nodegroups.api.clever-cloud.com/v1 is not served")
	e := Explain(s, pod("web", "open", "1", nil))
	g.Expect(poolOf(e, "open").Excluded).To(Equal("nodepool: CleverNodeClass default is not Ready (NodeGroupAPIServed=False NotServed: nodegroups.api.clever-cloud.com/v1 is not served)"))
}

func TestQuotaVerdicts(t *testing.T) {
	g := NewWithT(t)
	size := quota.Usage{CPU: 4, GB: 4}
	// A refused use the launch would reach, in both resources.
	s := &quota.Snapshot{Sure: quota.Usage{CPU: 40, GB: 40}, Refused: []quota.Remembered{{Use: quota.Usage{CPU: 24, GB: 32}, Until: now.Add(5 * time.Minute)}}}
	g.Expect(quotaVerdict(s, quota.Usage{CPU: 20, GB: 28}, size, now)).To(Equal("charges 4 vCPU / 4 GB, bringing the use to 24 vCPU / 32 GB, at or beyond the refused use 24 vCPU / 32 GB, not tried again before 2026-12-03T12:05:00Z"))
	g.Expect(quotaVerdict(s, quota.Usage{CPU: 20, GB: 27}, size, now)).To(BeEmpty(), "short of the refused use in memory")
	g.Expect(quotaVerdict(s, quota.Usage{CPU: 20, GB: 28}, size, now.Add(5*time.Minute))).To(BeEmpty(), "the refusal's memory ended")
	// A probe while a refused reservation may leak; the leak counts as used.
	s = &quota.Snapshot{Sure: quota.Usage{CPU: 24, GB: 32}, NextProbe: now.Add(3 * time.Minute), Leaks: []quota.Remembered{{Use: size, Until: now.Add(3 * time.Minute)}}}
	g.Expect(quotaVerdict(s, quota.Usage{CPU: 20, GB: 24}, size, now)).To(Equal("charges 4 vCPU / 4 GB, bringing the use to 28 vCPU / 32 GB, beyond what launches fly together on (24 vCPU / 32 GB): a probe, not sent before 2026-12-03T12:03:00Z while a refused reservation may still leak"))
	g.Expect(quotaVerdict(s, quota.Usage{CPU: 16, GB: 24}, size, now)).To(BeEmpty(), "within what flies together")
	g.Expect(quotaVerdict(nil, quota.Usage{}, size, now)).To(BeEmpty(), "no saved state, no verdict")
}

func TestRefusedFlavorsAreSetAsideUntilTheirEventSaid(t *testing.T) {
	g := NewWithT(t)
	s := state(t)
	s.Events = []corev1.Event{
		event(cp.ReasonFlavorUnsupported, "karpenter", "NodeClaim", "", "open-abcde", "The NodeGroup API does not serve flavor XS; offering it as unavailable for 1h0m0s: 422", now.Add(-10*time.Minute)),
		event(cp.ReasonRefused, "karpenter", "NodeClaim", "", "open-fghij", "The node-group operator refused NodeGroup open-fghij (flavor 2XS) for a reason the provider does not know (Nope): no; deleting it, and offering the flavor as unavailable for 3m0s", now.Add(-5*time.Minute)),
	}
	e := Explain(s, pod("web", "open", "1", nil))
	g.Expect(flavorOf(e, "open", "XS").Excluded).To(ConsistOf("unavailable: NodeGroupFlavorUnsupported on nodeclaim open-abcde, until 2026-12-03T12:50:00Z"))
	g.Expect(flavorOf(e, "open", "2XS").Excluded).To(BeEmpty(), "its 3 minutes are over")
	g.Expect(e.Cheapest).To(Equal(&Choice{Pool: "open", Flavor: "2XS", PriceHourly: 0.0333}))
}

func TestPendingReasons(t *testing.T) {
	g := NewWithT(t)
	s := state(t)
	p := pod("web", "open", "1", nil)
	s.Events = []corev1.Event{
		event("FailedScheduling", "default-scheduler", "Pod", "app", "web", "0/3 nodes are available", now.Add(-10*time.Second)),
		event("FailedScheduling", "karpenter", "Pod", "app", "web", "Failed to schedule pod, all available instance types exceed limits for nodepool", now.Add(-time.Minute)),
	}
	g.Expect(pendingReason(s, p).Message).To(HavePrefix("Failed to schedule pod"), "Karpenter's word over the scheduler's")
	s.Events = append(s.Events, event(cp.ReasonWaitingOnQuota, "karpenter", "Pod", "app", "web", "Waiting on the organisation quota", now.Add(-2*time.Minute)))
	g.Expect(pendingReason(s, p).Reason).To(Equal(cp.ReasonWaitingOnQuota), "the provider's word while fresh")
	s.Now = now.Add(waitingFresh)
	g.Expect(pendingReason(s, p).Reason).To(Equal("FailedScheduling"))
	s.Events = nil
	g.Expect(pendingReason(s, p)).To(Equal(PendingStatus{}))
}

func TestStatusCostsEachPoolAtItsNodesFlavors(t *testing.T) {
	g := NewWithT(t)
	s := state(t)
	node := func(name, poolName, flavor string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: poolName, corev1.LabelInstanceTypeStable: flavor}}}
	}
	s.Nodes = []corev1.Node{node("a", "open", "2XS"), node("b", "open", "XS"), node("c", "all", "ZZ"), {ObjectMeta: metav1.ObjectMeta{Name: "cp"}}}
	s.NodePools[1].Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}
	s.Lease = &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("host_1234"), RenewTime: &metav1.MicroTime{Time: now.Add(-3 * time.Second)}}}
	s.Summary = "as of 2026-12-03T11:59:00Z\nin use: 20 vCPU / 28 GB\n"
	s.Pods = []corev1.Pod{*pod("web", "open", "1", nil)}
	st := BuildStatus(s)
	g.Expect(st.NodePools).To(Equal([]PoolStatus{
		{Name: "all", Nodes: map[string]int{"ZZ": 1}, Unpriced: []string{"c"}},
		{Name: "capped", Nodes: map[string]int{}, Limits: "cpu 0 of 2"},
		{Name: "open", Nodes: map[string]int{"2XS": 1, "XS": 1}, CostHourly: 0.0944},
	}))
	g.Expect(st.Leader).To(Equal("host_1234, renewed 3s ago; not a pod of karpenter, and no controller Deployment there: its version is unknown (a controller run out of the cluster?)"))
	g.Expect(st.Prices).To(HavePrefix("PricesCurrent=True Refreshed: prices refreshed at 2026-12-03T11:00:00Z"))
	g.Expect(st.Preflight).To(HavePrefix("not readable through the apiserver (the leader is not a pod of karpenter); on the leader: kubectl -n karpenter port-forward"))
	var b bytes.Buffer
	g.Expect(WriteStatus(&b, st)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("  open: 1 2XS, 1 XS, 0.0944 EUR/h\n"))
	g.Expect(b.String()).To(ContainSubstring("  capped: no node, 0.0000 EUR/h; limits: cpu 0 of 2\n"))
	g.Expect(b.String()).To(ContainSubstring("  counted now: 20 vCPU / 28 GB in use\n"))
	g.Expect(b.String()).To(ContainSubstring("  app/web: no event yet\n"))
	raw, err := json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"costHourly":0.0944`))
}

func TestMetricsAreReadFromTheExposition(t *testing.T) {
	g := NewWithT(t)
	m, err := ParseMetrics([]byte(`# TYPE karpenter_clevercloud_preflight_check gauge
karpenter_clevercloud_preflight_check{check="nodegroup-api",result="pass"} 1
karpenter_clevercloud_preflight_check{check="nodegroup-api",result="fail"} 0
karpenter_clevercloud_preflight_check{check="other-karpenter",result="warn"} 1
# TYPE karpenter_clevercloud_catalog_overrides_valid gauge
karpenter_clevercloud_catalog_overrides_valid 0
# TYPE karpenter_clevercloud_catalog_flavor_price_hourly gauge
karpenter_clevercloud_catalog_flavor_price_hourly{flavor="XS"} 0.07
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Preflight).To(Equal(map[string]string{"nodegroup-api": "pass", "other-karpenter": "warn"}))
	g.Expect(m.OverridesValid).To(Equal(ptr.To(0.0)))
	s := state(t)
	s.Metrics = m
	price, _ := s.price("XS")
	g.Expect(price).To(Equal(0.07), "the leader's price, the refresher's included, over the catalogue's")
	g.Expect(preflightText(s)).To(Equal("nodegroup-api: pass, other-karpenter: warn"))
}
