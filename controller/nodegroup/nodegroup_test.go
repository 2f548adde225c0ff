package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
)

func testClaim() *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "default-abcde",
			UID:  types.UID("1f6e2a3c-0000-4000-8000-000000000001"),
			Labels: map[string]string{
				// What Karpenter core puts on a claim: its node pool, the class reference,
				// well-known labels from the template and resolved requirements, and the
				// pool's user labels.
				"karpenter.sh/nodepool":                      "default",
				"karpenter.clever-cloud.com/clevernodeclass": "standard",
				"karpenter.sh/capacity-type":                 "on-demand",
				"node.kubernetes.io/instance-type":           "M",
				"kubernetes.io/arch":                         "amd64",
				"topology.kubernetes.io/zone":                "par",
				"topology.kubernetes.io/region":              "par",
				"team":                                       "claim-team",
				"app":                                        "web",
			},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints: []corev1.Taint{
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				// Karpenter's own unregistered taint in the claim must not be repeated.
				karpv1.UnregisteredNoExecuteTaint,
			},
			StartupTaints: []corev1.Taint{
				{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute},
			},
		},
	}
}

func testClass() *v1alpha1.CleverNodeClass {
	return &v1alpha1.CleverNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "standard"},
		Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{
			"team":        "platform",
			"cost-center": "42",
		}},
	}
}

func TestBuild(t *testing.T) {
	g := NewWithT(t)
	claim, class := testClaim(), testClass()
	ng := Build(claim, class, "M")

	g.Expect(ng.APIVersion).To(Equal("api.clever-cloud.com/v1"))
	g.Expect(ng.Kind).To(Equal("NodeGroup"))
	g.Expect(ng.Name).To(Equal("default-abcde"))
	g.Expect(ng.Namespace).To(BeEmpty(), "NodeGroups are cluster-scoped")

	g.Expect(ng.Labels).To(Equal(map[string]string{
		"karpenter.clever-cloud.com/nodeclaim": "default-abcde",
		"karpenter.clever-cloud.com/nodeclass": "standard",
		"karpenter.sh/nodepool":                "default",
	}))
	g.Expect(ng.Annotations).To(Equal(map[string]string{
		"karpenter.clever-cloud.com/nodeclass-hash":         class.Hash(),
		"karpenter.clever-cloud.com/nodeclass-hash-version": "v1",
		"karpenter.clever-cloud.com/nodeclaim-uid":          string(claim.UID),
	}))
	g.Expect(ng.Annotations[v1alpha1.AnnotationNodeClassHash]).NotTo(BeEmpty())

	// No owner reference: a claim deleted with foreground propagation would have Kubernetes'
	// garbage collector delete the group, and the VM, before Karpenter drains the node.
	g.Expect(ng.OwnerReferences).To(BeEmpty())

	g.Expect(ng.Spec.Flavor).To(Equal("M"))
	g.Expect(ng.Spec.NodeCount).To(Equal(int32(1)))
	// Only user labels: CKE copies spec.labels to every node of the group, extra nodes of an
	// out-of-band resize included, and Karpenter copies the claim's owned labels at registration.
	g.Expect(ng.Spec.Labels).To(Equal(map[string]string{
		"team":        "platform",
		"cost-center": "42",
		"app":         "web",
	}))
	g.Expect(ng.Spec.Taints).To(Equal([]ngv1.Taint{
		{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute},
	}))
	g.Expect(ng.Status).To(Equal(ngv1.NodeGroupStatus{}))

	// Build does not mutate its inputs.
	g.Expect(claim).To(Equal(testClaim()))
	g.Expect(class).To(Equal(testClass()))

	// What Build makes, the ownership helpers recognise.
	g.Expect(IsManaged(ng)).To(BeTrue())
	g.Expect(OwnerClaim(ng)).To(Equal(&Owner{Name: "default-abcde", UID: claim.UID}))
	g.Expect(LegacyOwnerReference(ng)).To(BeNil())
}

func TestBuildMinimalClaim(t *testing.T) {
	g := NewWithT(t)
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "u1", Labels: map[string]string{
		"kubernetes.io/hostname": "x",
	}}}
	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}
	ng := Build(claim, class, "2XS")
	g.Expect(ng.Labels).To(Equal(map[string]string{
		v1alpha1.LabelNodeClaim: "c1",
		v1alpha1.LabelNodeClass: "empty",
	}), "no nodepool label without a nodepool")
	g.Expect(ng.Spec.Labels).To(BeNil())
	g.Expect(ng.Spec.Taints).To(Equal([]ngv1.Taint{{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}))
	g.Expect(ng.Spec.Flavor).To(Equal("2XS"))
}

func TestBuildUnregisteredTaintIsNeverDuplicated(t *testing.T) {
	g := NewWithT(t)
	claim := testClaim()
	claim.Spec.Taints = []corev1.Taint{
		{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "a", Value: "1", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	claim.Spec.StartupTaints = []corev1.Taint{karpv1.UnregisteredNoExecuteTaint, {Key: "b", Effect: corev1.TaintEffectNoSchedule}}
	ng := Build(claim, testClass(), "S")
	g.Expect(ng.Spec.Taints).To(Equal([]ngv1.Taint{
		{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
		{Key: "a", Value: "1", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "b", Effect: corev1.TaintEffectNoSchedule},
	}))
}

func TestBuildHashFollowsTheClass(t *testing.T) {
	g := NewWithT(t)
	a := Build(testClaim(), testClass(), "M")
	class := testClass()
	class.Spec.Labels["team"] = "other"
	b := Build(testClaim(), class, "M")
	g.Expect(a.Annotations[v1alpha1.AnnotationNodeClassHash]).NotTo(Equal(b.Annotations[v1alpha1.AnnotationNodeClassHash]))
	g.Expect(b.Spec.Labels).To(HaveKeyWithValue("team", "other"))
}

func TestNodeLabels(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name         string
		claim, class map[string]string
		want         map[string]string
	}{
		{"both nil", nil, nil, nil},
		{"only reserved", map[string]string{"kubernetes.io/os": "linux"}, nil, nil},
		{"reserved prefixes dropped", map[string]string{
			"kubernetes.io/arch":               "amd64",
			"node.kubernetes.io/instance-type": "M",
			"clever-cloud.com/flavor":          "M",
			"clever-cloud.com/anything":        "x",
			"keep":                             "me",
		}, nil, map[string]string{"keep": "me"}},
		{"every karpenter.sh key dropped", map[string]string{
			"karpenter.sh/nodepool":      "default",
			"karpenter.sh/capacity-type": "on-demand",
			"karpenter.sh/registered":    "true",
			"karpenter.sh/initialized":   "true",
			"sub.karpenter.sh/x":         "y",
		}, nil, nil},
		{"provider keys dropped", map[string]string{
			"karpenter.clever-cloud.com/instance-cpu":    "8",
			"karpenter.clever-cloud.com/clevernodeclass": "default",
			"karpenter.clever-cloud.com/nodeclaim":       "c",
		}, nil, nil},
		{"zone and region come from the claim at registration, not from the group", map[string]string{
			"topology.kubernetes.io/zone":            "par",
			"topology.kubernetes.io/region":          "par",
			"failure-domain.beta.kubernetes.io/zone": "par",
		}, nil, nil},
		{"similar but unowned keys kept", map[string]string{
			"topology.kubernetes.io/rack": "r1",
			"example.kubernetes.io/x":     "y",
			"my.clever-cloud.com/x":       "y",
			"notkarpenter.sh/x":           "y",
			"karpenter.sh":                "y",
		}, nil, map[string]string{
			"topology.kubernetes.io/rack": "r1",
			"example.kubernetes.io/x":     "y",
			"my.clever-cloud.com/x":       "y",
			"notkarpenter.sh/x":           "y",
			"karpenter.sh":                "y",
		}},
		{"invalid values dropped", map[string]string{
			"too-long":    long,
			"space":       "a b",
			"dash-ending": "abc-",
			"slash":       "a/b",
			"empty":       "",
			"ok":          "a.b_c-d",
		}, nil, map[string]string{"empty": "", "ok": "a.b_c-d"}},
		{"invalid keys dropped", map[string]string{
			"UPPER.example.com/x": "v",
			"-leading":            "v",
			"a/b/c":               "v",
			"":                    "v",
			long:                  "v",
			"Valid_Name":          "v",
		}, nil, map[string]string{"Valid_Name": "v"}},
		{"class wins over claim", map[string]string{"team": "claim", "only-claim": "1"},
			map[string]string{"team": "class", "only-class": "2"},
			map[string]string{"team": "class", "only-claim": "1", "only-class": "2"}},
		{"owned class labels (admitted before the CRD rule) are dropped too", nil,
			map[string]string{"node.kubernetes.io/role": "x", "karpenter.sh/nodepool": "p", "topology.kubernetes.io/zone": "elsewhere", "ok": "y"},
			map[string]string{"ok": "y"}},
		{"an inadmissible class value does not erase the claim's", map[string]string{"team": "claim"},
			map[string]string{"team": "bad value"}, map[string]string{"team": "claim"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(NodeLabels(tc.claim, tc.class)).To(Equal(tc.want))
		})
	}
}

// Whatever a claim and class carry, a group never asks CKE for a label somebody else owns.
func TestBuildNeverPutsAnOwnedLabelInSpecLabels(t *testing.T) {
	g := NewWithT(t)
	claim := testClaim()
	for k := range karpv1.WellKnownLabels {
		claim.Labels[k] = "x"
	}
	for k := range karpv1.NormalizedLabels {
		claim.Labels[k] = "x"
	}
	class := testClass()
	class.Spec.Labels["topology.kubernetes.io/zone"] = "elsewhere"
	class.Spec.Labels["karpenter.sh/nodepool"] = "other"
	ng := Build(claim, class, "M")
	for k := range ng.Spec.Labels {
		g.Expect(labels.OwnerOf(k)).To(Equal(labels.User), k)
		g.Expect(k).NotTo(HavePrefix("karpenter.sh/"))
	}
	g.Expect(ng.Spec.Labels).To(HaveKeyWithValue("team", "platform"))
	// Ownership bookkeeping lives in the object's own labels, which CKE does not copy to nodes.
	g.Expect(ng.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, claim.Labels[karpv1.NodePoolLabelKey]))
}

func TestProviderIDRoundTrip(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{"default-abcde", "a", "x-1-2-3"} {
		id := ProviderID(name)
		g.Expect(id).To(Equal("clevercloud://" + name))
		g.Expect(GroupName(id)).To(Equal(name))
	}
	for _, foreign := range []string{
		"",
		"aws:///eu-west-3a/i-0123",
		"kind://docker/kind/kind-worker",
		"clevercloud:/x",
		"CLEVERCLOUD://x",
		"xclevercloud://x",
		"default-abcde",
	} {
		g.Expect(GroupName(foreign)).To(BeEmpty(), "%q is not ours", foreign)
	}
	g.Expect(GroupName("clevercloud://")).To(BeEmpty())
}

func TestIsManagedAndOwnerClaim(t *testing.T) {
	claimRef := metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "c", UID: "u"}
	uid := map[string]string{v1alpha1.AnnotationNodeClaimUID: "u2"}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		refs        []metav1.OwnerReference
		managed     bool
		owner       *Owner
		legacy      bool
	}{
		{"nothing", nil, nil, nil, false, nil, false},
		{"label only", map[string]string{v1alpha1.LabelNodeClaim: "c"}, nil, nil, true, nil, false},
		{"empty label value", map[string]string{v1alpha1.LabelNodeClaim: ""}, nil, nil, false, nil, false},
		{"other labels only", map[string]string{v1alpha1.LabelNodeClass: "x"}, nil, nil, false, nil, false},
		{"label and claim UID", map[string]string{v1alpha1.LabelNodeClaim: "c"}, uid, nil, true, &Owner{"c", "u2"}, false},
		{"empty claim UID", map[string]string{v1alpha1.LabelNodeClaim: "c"}, map[string]string{v1alpha1.AnnotationNodeClaimUID: ""}, nil, true, nil, false},
		{"owner reference only", nil, nil, []metav1.OwnerReference{claimRef}, false, &Owner{"c", "u"}, true},
		{"label and owner reference", map[string]string{v1alpha1.LabelNodeClaim: "c"}, nil, []metav1.OwnerReference{claimRef}, true, &Owner{"c", "u"}, true},
		{"the annotation wins over an owner reference", map[string]string{v1alpha1.LabelNodeClaim: "c"}, uid, []metav1.OwnerReference{claimRef}, true, &Owner{"c", "u2"}, true},
		{"other version of karpenter.sh", nil, nil, []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1beta1", Kind: "NodeClaim", Name: "c", UID: "u"}}, false, &Owner{"c", "u"}, true},
		{"NodeClaim of another group", nil, nil, []metav1.OwnerReference{{APIVersion: "evil.example/v1", Kind: "NodeClaim", Name: "c"}}, false, nil, false},
		{"group that only starts like karpenter.sh", nil, nil, []metav1.OwnerReference{{APIVersion: "karpenter.sh.evil/v1", Kind: "NodeClaim", Name: "c"}}, false, nil, false},
		{"karpenter.sh but not a NodeClaim", nil, nil, []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "c"}}, false, nil, false},
		{"NodeClaim after another owner", nil, nil, []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, claimRef,
		}, false, &Owner{"c", "u"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ng := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Labels: tc.labels, Annotations: tc.annotations, OwnerReferences: tc.refs}}
			g.Expect(IsManaged(ng)).To(Equal(tc.managed))
			g.Expect(OwnerClaim(ng)).To(Equal(tc.owner))
			if !tc.legacy {
				g.Expect(LegacyOwnerReference(ng)).To(BeNil())
				return
			}
			// It points into the object, not at a copy.
			g.Expect(LegacyOwnerReference(ng)).To(BeIdenticalTo(&ng.OwnerReferences[len(ng.OwnerReferences)-1]))
		})
	}
}

func cond(typ, status, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
}

const quotaMsg = "Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB"

func TestJudge(t *testing.T) {
	now := metav1.Now()
	ready := cond(ngv1.ConditionReady, "True", ngv1.ReasonSynced, "")
	notReady := cond(ngv1.ConditionReady, "False", "Provisioning", "")
	creating := cond(ngv1.ConditionReconcileInProgress, "True", ngv1.ReasonCreating, "")
	scaling := cond(ngv1.ConditionReconcileInProgress, "True", ngv1.ReasonScaling, "")
	quotaCond := cond(ngv1.ConditionReconcileFailed, "True", ngv1.ReasonQuotaExceeded, quotaMsg)
	quotaEmpty := cond(ngv1.ConditionReconcileFailed, "True", ngv1.ReasonQuotaExceeded, "")
	upstream := cond(ngv1.ConditionReconcileFailed, "True", ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess")
	other := cond(ngv1.ConditionReconcileFailed, "True", "InvalidFlavor", "no")
	gone := Verdict{Outcome: Vanished, Message: "the NodeGroup is gone or terminating"}
	for _, tc := range []struct {
		name     string
		deleting bool
		phase    string
		status   func(*ngv1.NodeGroupStatus)
		conds    []metav1.Condition
		want     Verdict
	}{
		{"empty status", false, "", nil, nil, Verdict{Outcome: Pending}},
		{"unknown phase", false, "Provisioning", nil, nil, Verdict{Outcome: Pending}},
		{"Ready=False", false, "", nil, []metav1.Condition{notReady}, Verdict{Outcome: Pending}},
		{"Ready=Unknown", false, "", nil, []metav1.Condition{cond(ngv1.ConditionReady, "Unknown", "X", "")}, Verdict{Outcome: Pending}},

		// Today's platform: the first write is the decision.
		{"today: Creating", false, ngv1.PhaseCreating, nil, []metav1.Condition{creating}, Verdict{Outcome: Launched, Accepted: true}},
		{"phase Creating alone", false, ngv1.PhaseCreating, nil, nil, Verdict{Outcome: Launched, Accepted: true}},
		{"ReconcileInProgress Creating alone", false, "", nil, []metav1.Condition{creating}, Verdict{Outcome: Launched, Accepted: true}},
		{"ReconcileInProgress Creating turned False still proves acceptance", false, "", nil,
			[]metav1.Condition{cond(ngv1.ConditionReconcileInProgress, "False", ngv1.ReasonCreating, "")}, Verdict{Outcome: Launched, Accepted: true}},
		{"ReconcileInProgress of another reason is no acceptance", false, "", nil,
			[]metav1.Condition{cond(ngv1.ConditionReconcileInProgress, "True", "Validating", "")}, Verdict{Outcome: Pending}},
		{"a node proves acceptance", false, "", func(s *ngv1.NodeGroupStatus) { s.NodeCount = 1 }, nil, Verdict{Outcome: Launched, Accepted: true}},
		{"an upstream ID proves acceptance", false, "", func(s *ngv1.NodeGroupStatus) { s.UpstreamID = "ng_1" }, nil, Verdict{Outcome: Launched, Accepted: true}},
		{"today: Synced", false, ngv1.PhaseSynced, nil, []metav1.Condition{ready, cond(ngv1.ConditionReconcileInProgress, "False", ngv1.ReasonCreating, "")},
			Verdict{Outcome: Synced, Accepted: true, Synced: true}},
		{"today: quota refusal, empty message", false, ngv1.PhaseQuotaExceeded, nil, []metav1.Condition{quotaEmpty},
			Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: "ReconcileFailed: QuotaExceeded"}},
		{"today: UpstreamError while creating", false, ngv1.PhaseUpstreamError, nil, []metav1.Condition{creating, upstream},
			Verdict{Outcome: Transient, Reason: ngv1.ReasonUpstreamError, Message: "API error: RequestDidntReturnSuccess", Accepted: true}},
		{"today: UpstreamError on a synced group scaling", false, ngv1.PhaseUpstreamError, nil, []metav1.Condition{ready, scaling, upstream},
			Verdict{Outcome: Transient, Reason: ngv1.ReasonUpstreamError, Message: "API error: RequestDidntReturnSuccess", Accepted: true, Synced: true}},
		{"UpstreamError before any acceptance is still transient", false, "", nil, []metav1.Condition{upstream},
			Verdict{Outcome: Transient, Reason: ngv1.ReasonUpstreamError, Message: "API error: RequestDidntReturnSuccess"}},
		{"phase UpstreamError alone", false, ngv1.PhaseUpstreamError, nil, nil,
			Verdict{Outcome: Transient, Reason: ngv1.ReasonUpstreamError, Message: "phase UpstreamError"}},
		{"unknown reason, never accepted: an unclassified refusal", false, "InvalidFlavor", nil, []metav1.Condition{other},
			Verdict{Outcome: Refused, Reason: "InvalidFlavor", Message: "no"}},
		{"unknown reason on a Creating group: transient", false, ngv1.PhaseCreating, nil, []metav1.Condition{creating, other},
			Verdict{Outcome: Transient, Reason: "InvalidFlavor", Message: "no", Accepted: true}},
		{"unknown reason without a message or a reason", false, "", nil, []metav1.Condition{cond(ngv1.ConditionReconcileFailed, "True", "", "")},
			Verdict{Outcome: Refused, Reason: "Unknown", Message: "ReconcileFailed: Unknown"}},
		{"ReconcileFailed=False is no failure", false, "", nil, []metav1.Condition{cond(ngv1.ConditionReconcileFailed, "False", "InvalidFlavor", "old"), creating},
			Verdict{Outcome: Launched, Accepted: true}},

		// Clusters not upgraded yet (2026-06): Synced directly, quota message with the limit.
		{"legacy: Ready=True", false, "", nil, []metav1.Condition{ready}, Verdict{Outcome: Synced, Accepted: true, Synced: true}},
		{"legacy: phase Synced", false, ngv1.PhaseSynced, nil, nil, Verdict{Outcome: Synced, Accepted: true, Synced: true}},
		{"phase Synced with Ready=False", false, ngv1.PhaseSynced, nil, []metav1.Condition{notReady}, Verdict{Outcome: Synced, Accepted: true, Synced: true}},
		{"legacy: phase QuotaExceeded alone", false, ngv1.PhaseQuotaExceeded, nil, nil, Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: "phase QuotaExceeded"}},
		{"legacy: phase QuotaExceeded with the condition's message", false, ngv1.PhaseQuotaExceeded, nil, []metav1.Condition{quotaCond},
			Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: quotaMsg}},
		{"phase QuotaExceeded, ReconcileFailed of another reason without message", false, ngv1.PhaseQuotaExceeded, nil,
			[]metav1.Condition{cond(ngv1.ConditionReconcileFailed, "True", "Other", "")}, Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: "phase QuotaExceeded"}},
		{"legacy: ReconcileFailed QuotaExceeded alone", false, "", nil, []metav1.Condition{quotaCond}, Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: quotaMsg}},
		{"ReconcileFailed=False QuotaExceeded is not a rejection", false, "", nil, []metav1.Condition{cond(ngv1.ConditionReconcileFailed, "False", ngv1.ReasonQuotaExceeded, "old")}, Verdict{Outcome: Pending}},

		// A refusal wins over readiness, at any time.
		{"quota wins over Ready=True", false, "", nil, []metav1.Condition{ready, quotaCond}, Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: quotaMsg, Accepted: true, Synced: true}},
		{"quota wins over phase Synced", false, ngv1.PhaseSynced, nil, []metav1.Condition{quotaCond}, Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: quotaMsg, Accepted: true, Synced: true}},
		{"quota after Creating is still a refusal", false, ngv1.PhaseQuotaExceeded, nil, []metav1.Condition{creating, quotaEmpty},
			Verdict{Outcome: QuotaExceeded, Reason: ngv1.ReasonQuotaExceeded, Message: "ReconcileFailed: QuotaExceeded", Accepted: true}},
		{"unknown reason beside Ready=True is transient", false, "", nil, []metav1.Condition{cond(ngv1.ConditionReconcileFailed, "True", "Transient", "x"), ready},
			Verdict{Outcome: Transient, Reason: "Transient", Message: "x", Accepted: true, Synced: true}},

		{"deleting", true, "", nil, nil, gone},
		{"deleting wins over Ready", true, ngv1.PhaseSynced, nil, []metav1.Condition{ready}, gone},
		{"deleting wins over quota", true, ngv1.PhaseQuotaExceeded, nil, []metav1.Condition{quotaCond}, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ng := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Status: ngv1.NodeGroupStatus{Phase: tc.phase, Conditions: tc.conds}}
			if tc.status != nil {
				tc.status(&ng.Status)
			}
			if tc.deleting {
				ng.DeletionTimestamp = &now
			}
			g.Expect(Judge(ng)).To(Equal(tc.want))
		})
	}
	NewWithT(t).Expect(Judge(nil).Outcome).To(Equal(Vanished))
}

// The operator may drop every sign of acceptance from the status; what the caller saw earlier
// still makes an unknown failure transient.
func TestJudgeAfterRemembersAcceptance(t *testing.T) {
	g := NewWithT(t)
	ng := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Status: ngv1.NodeGroupStatus{
		Phase: "Failed", Conditions: []metav1.Condition{cond(ngv1.ConditionReconcileFailed, "True", "VMBootFailed", "boom")},
	}}
	g.Expect(JudgeAfter(ng, false)).To(Equal(Verdict{Outcome: Refused, Reason: "VMBootFailed", Message: "boom"}))
	g.Expect(JudgeAfter(ng, true)).To(Equal(Verdict{Outcome: Transient, Reason: "VMBootFailed", Message: "boom", Accepted: true}))
	// History never overrides a quota refusal nor a deletion.
	ng.Status.Phase = ngv1.PhaseQuotaExceeded
	g.Expect(JudgeAfter(ng, true).Outcome).To(Equal(QuotaExceeded))
	g.Expect(JudgeAfter(nil, true).Outcome).To(Equal(Vanished))
	// Nor does it make a group that shows nothing more than accepted.
	g.Expect(JudgeAfter(&ngv1.NodeGroup{}, true)).To(Equal(Verdict{Outcome: Launched, Accepted: true}))
}

func TestOutcomeString(t *testing.T) {
	g := NewWithT(t)
	all := []Outcome{Pending, Launched, Synced, QuotaExceeded, Refused, Transient, Vanished, TimedOut}
	names := []string{}
	for _, o := range all {
		names = append(names, o.String())
	}
	g.Expect(names).To(Equal([]string{"Pending", "Launched", "Synced", "QuotaExceeded", "Refused", "Transient", "Vanished", "TimedOut"}))
	g.Expect(Outcome(42).String()).To(Equal("Unknown"))
	for _, o := range all {
		g.Expect(o.Decided()).To(Equal(o != Pending), o.String())
		g.Expect(o.Refusal()).To(Equal(o == QuotaExceeded || o == Refused), o.String())
	}
}

func TestParseQuotaMessage(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		ok   bool
		want QuotaUsage
	}{
		{quotaMsg, true, QuotaUsage{Resource: "RAM", Limit: 40, Actual: 48}},
		{"Quota exceeded: CPU max: limit = 40 | actual = 44", true, QuotaUsage{Resource: "CPU", Limit: 40, Actual: 44}},
		{"Quota exceeded: RAM max: limit = 40.5 GB | actual = 48.25 GB", true, QuotaUsage{Resource: "RAM", Limit: 40.5, Actual: 48.25}},
		{"admission: Quota exceeded: CPU max: limit = 8 | actual = 12", true, QuotaUsage{Resource: "CPU", Limit: 8, Actual: 12}},
		{"Quota exceeded:   RAM max:   limit = 1e1 GB   |   actual = 2 GB  ", true, QuotaUsage{Resource: "RAM", Limit: 10, Actual: 2}},
		{"", false, QuotaUsage{}},
		{"garbage", false, QuotaUsage{}},
		{"quota exceeded: RAM max: limit = 40 | actual = 48", false, QuotaUsage{}},
		{"Quota exceeded:", false, QuotaUsage{}},
		{"Quota exceeded: RAM", false, QuotaUsage{}},
		{"Quota exceeded: RAM max: limit = 40 GB", false, QuotaUsage{}},
		{"Quota exceeded: RAM max: limit = forty | actual = 48", false, QuotaUsage{}},
		{"Quota exceeded: RAM max: limit = 40 | actual = lots", false, QuotaUsage{}},
		{"Quota exceeded: RAM max: ceiling = 40 | actual = 48", false, QuotaUsage{}},
		{"Quota exceeded: RAM max: limit = 40 | used = 48", false, QuotaUsage{}},
		{"Quota exceeded: RAM maximum: limit = 40 | actual = 48", false, QuotaUsage{}},
	} {
		got, ok := ParseQuotaMessage(tc.msg)
		NewWithT(t).Expect([]any{got, ok}).To(Equal([]any{tc.want, tc.ok}), "%q", tc.msg)
	}
}

func TestParseQuotaMessageRoundTrip(t *testing.T) {
	for _, tc := range []QuotaUsage{
		{"RAM", 40, 48}, {"CPU", 40, 44}, {"RAM", 0, 0.5}, {"GPU", 1e6, 1.5e6}, {"RAM", 40.125, 41.75},
	} {
		for _, unit := range []string{"", " GB"} {
			msg := fmt.Sprintf("Quota exceeded: %s max: limit = %v%s | actual = %v%s", tc.Resource, tc.Limit, unit, tc.Actual, unit)
			got, ok := ParseQuotaMessage(msg)
			NewWithT(t).Expect(ok).To(BeTrue(), msg)
			NewWithT(t).Expect(got).To(Equal(tc), msg)
		}
	}
}

func FuzzParseQuotaMessage(f *testing.F) {
	for _, seed := range []string{
		quotaMsg,
		"Quota exceeded: CPU max: limit = 40 | actual = 44",
		"Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB | extra",
		"Quota exceeded: RAM max: limit = NaN | actual = Inf",
		"Quota exceeded: RAM max: limit = 1e999 | actual = -0x1p-2",
		"Quota exceeded: max: limit = 1 | actual = 2",
		"Quota exceeded: RAM max: |",
		"Quota exceeded: RAM max: limit = | actual =",
		"Quota exceeded:",
		"Quota exceeded: \x00 max: limit = 1 | actual = 2",
		"Quota exceeded: é max: limit = 1 | actual = 2",
		"",
		"garbage",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		q, ok := ParseQuotaMessage(msg) // must never panic
		if !ok {
			if q != (QuotaUsage{}) {
				t.Fatalf("%q: not ok but returned %+v", msg, q)
			}
			return
		}
		if !strings.Contains(msg, "Quota exceeded:") {
			t.Fatalf("%q: parsed without the marker", msg)
		}
		if q.Resource == "" || strings.TrimSpace(q.Resource) != q.Resource {
			t.Fatalf("%q: resource %q is empty or untrimmed", msg, q.Resource)
		}
		if !strings.Contains(msg, q.Resource) {
			t.Fatalf("%q: resource %q does not come from the message", msg, q.Resource)
		}
	})
}

// claimReader is an uncached reader holding at most one NodeClaim, or failing every read.
type claimReader struct {
	claim *karpv1.NodeClaim
	err   error
	gets  int
}

func (r *claimReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	if r.claim == nil || key.Name != r.claim.Name {
		return apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}, key.Name)
	}
	r.claim.DeepCopyInto(obj.(*karpv1.NodeClaim))
	return nil
}

func (r *claimReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not used")
}

func TestConfirmOwner(t *testing.T) {
	ctx := context.Background()
	claim := testClaim()
	built := Build(claim, testClass(), "M")
	for _, tc := range []struct {
		name   string
		group  func() *ngv1.NodeGroup
		reader *claimReader
		owned  bool
		why    string
	}{
		{"built for a live claim", built.DeepCopy, &claimReader{claim: claim}, true, ""},
		{"hand-copied: labels but no claim UID", func() *ngv1.NodeGroup {
			ng := built.DeepCopy()
			delete(ng.Annotations, v1alpha1.AnnotationNodeClaimUID)
			return ng
		}, &claimReader{claim: claim}, false, "no NodeClaim UID"},
		{"launched by an earlier version: owner reference, no annotation", func() *ngv1.NodeGroup {
			ng := built.DeepCopy()
			delete(ng.Annotations, v1alpha1.AnnotationNodeClaimUID)
			ng.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}}
			return ng
		}, &claimReader{claim: claim}, true, ""},
		{"hand-copied under another name, claim UID included", func() *ngv1.NodeGroup {
			ng := built.DeepCopy()
			ng.Name = "copy"
			return ng
		}, &claimReader{claim: claim}, false, "do not both name the group"},
		{"label names another claim", func() *ngv1.NodeGroup {
			ng := built.DeepCopy()
			ng.Labels[v1alpha1.LabelNodeClaim] = "other"
			return ng
		}, &claimReader{claim: claim}, false, "do not both name the group"},
		{"owner claim gone", built.DeepCopy, &claimReader{}, false, "is gone"},
		{"owner claim recreated under the same name", built.DeepCopy, &claimReader{claim: func() *karpv1.NodeClaim {
			c := testClaim()
			c.UID = "another-uid"
			return c
		}()}, false, "has UID another-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ConfirmOwner(ctx, tc.reader, tc.group())
			if tc.owned {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.UID).To(Equal(claim.UID))
				g.Expect(tc.reader.gets).To(Equal(1), "confirmed by a read, not assumed")
				return
			}
			g.Expect(got).To(BeNil())
			g.Expect(err).To(MatchError(ErrNotOwned))
			g.Expect(err.Error()).To(ContainSubstring(tc.why))
		})
	}

	// A failed read is not a verdict: the caller must retry, not conclude "not owned".
	g := NewWithT(t)
	_, err := ConfirmOwner(ctx, &claimReader{err: errors.New("connection refused")}, built.DeepCopy())
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, ErrNotOwned)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("connection refused"))
}

func TestClaimOfAndOwnedBy(t *testing.T) {
	claim := testClaim()
	built := Build(claim, testClass(), "M")
	legacy := built.DeepCopy()
	delete(legacy.Annotations, v1alpha1.AnnotationNodeClaimUID)
	legacy.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}}
	// What `kubectl get -o yaml`, a rename and `kubectl create` make of a group: labels and
	// annotations come along, the claim UID included.
	renamed := built.DeepCopy()
	renamed.Name = "default-abcde-copy"
	relabelled := built.DeepCopy()
	relabelled.Labels[v1alpha1.LabelNodeClaim] = "other"
	bare := built.DeepCopy()
	delete(bare.Annotations, v1alpha1.AnnotationNodeClaimUID)
	other := testClaim()
	other.UID = "another-uid"
	for _, tc := range []struct {
		name   string
		group  *ngv1.NodeGroup
		owner  *Owner
		reason string // of ClaimOf
		ofThis string // OwnedBy's reason for claim when ClaimOf holds
	}{
		{"built", built, &Owner{Name: claim.Name, UID: claim.UID}, "", ""},
		{"legacy owner reference", legacy, &Owner{Name: claim.Name, UID: claim.UID}, "", ""},
		{"renamed copy", renamed, nil, ReasonNotNamedForItsClaim, ""},
		{"label names another claim", relabelled, nil, ReasonNotNamedForItsClaim, ""},
		{"no claim UID", bare, nil, ReasonNoOwnerClaim, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			owner, err := ClaimOf(tc.group)
			g.Expect(owner).To(Equal(tc.owner))
			g.Expect(NotOwnedReason(err)).To(Equal(tc.reason))
			if tc.reason != "" {
				g.Expect(err).To(MatchError(ErrNotOwned))
				g.Expect(OwnedBy(tc.group, claim)).To(MatchError(ErrNotOwned), "no claim owns what is not shaped for it")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(OwnedBy(tc.group, claim)).To(Succeed())
			err = OwnedBy(tc.group, other)
			g.Expect(err).To(MatchError(ErrNotOwned), "a claim of the same name and another UID")
			g.Expect(NotOwnedReason(err)).To(Equal(ReasonNotThisClaim))
		})
	}
	g := NewWithT(t)
	g.Expect(NotOwnedReason(errors.New("connection refused"))).To(BeEmpty())
	g.Expect(NotOwnedReason(fmt.Errorf("wrapped: %w", mustErr(ClaimOf(renamed))))).To(Equal(ReasonNotNamedForItsClaim))
}

func mustErr(_ *Owner, err error) error { return err }

// apiReader is an uncached reader holding at most one NodeGroup and one NodeClaim, counting
// reads, or failing every read.
type apiReader struct {
	group *ngv1.NodeGroup
	claim *karpv1.NodeClaim
	err   error
	gets  int
}

func (r *apiReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	switch o := obj.(type) {
	case *ngv1.NodeGroup:
		if r.group != nil && r.group.Name == key.Name {
			r.group.DeepCopyInto(o)
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: "api.clever-cloud.com", Resource: "nodegroups"}, key.Name)
	case *karpv1.NodeClaim:
		if r.claim != nil && r.claim.Name == key.Name {
			r.claim.DeepCopyInto(o)
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}, key.Name)
	}
	return fmt.Errorf("unexpected %T", obj)
}

func (r *apiReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not used")
}

func TestConfirmOrphan(t *testing.T) {
	ctx := context.Background()
	claim := testClaim()
	listed := Build(claim, testClass(), "M")
	listed.UID, listed.ResourceVersion = "group-uid", "7"
	// The group as the apiserver holds it now, if it differs from the listed one.
	withFresh := func(change func(*ngv1.NodeGroup)) *ngv1.NodeGroup {
		fresh := listed.DeepCopy()
		fresh.ResourceVersion = "8"
		change(fresh)
		return fresh
	}
	recreated := testClaim()
	recreated.UID = "another-uid"
	for _, tc := range []struct {
		name     string
		listed   func() *ngv1.NodeGroup
		reader   *apiReader
		orphaned bool
		notOwned string // the NotOwnedError reason, when the proof refuses the group
		why      string
	}{
		{"claim gone", listed.DeepCopy, &apiReader{group: withFresh(func(*ngv1.NodeGroup) {})}, true, "", ""},
		{"claim recreated under the same name", listed.DeepCopy, &apiReader{group: listed, claim: recreated}, true, "", ""},
		{"claim alive: the cache lagged", listed.DeepCopy, &apiReader{group: listed, claim: claim}, false, "", "is alive"},
		{"renamed copy", func() *ngv1.NodeGroup {
			copied := listed.DeepCopy()
			copied.Name = "default-abcde-copy"
			return copied
		}, &apiReader{}, false, ReasonNotNamedForItsClaim, "do not both name the group"},
		{"no claim UID", func() *ngv1.NodeGroup {
			bare := listed.DeepCopy()
			delete(bare.Annotations, v1alpha1.AnnotationNodeClaimUID)
			return bare
		}, &apiReader{}, false, ReasonNoOwnerClaim, "no NodeClaim UID"},
		{"group gone since listed", listed.DeepCopy, &apiReader{}, false, "", "is gone"},
		{"group replaced under its name", listed.DeepCopy, &apiReader{group: withFresh(func(g *ngv1.NodeGroup) { g.UID = "new-group" })}, false, "", "was replaced"},
		{"group terminating", listed.DeepCopy, &apiReader{group: withFresh(func(g *ngv1.NodeGroup) { g.DeletionTimestamp = &metav1.Time{} })}, false, "", "is terminating"},
		{"group now names another claim", listed.DeepCopy, &apiReader{group: withFresh(func(g *ngv1.NodeGroup) {
			g.Annotations[v1alpha1.AnnotationNodeClaimUID] = "another-uid"
		})}, false, "", "now names"},
		{"group stripped of its claim since listed", listed.DeepCopy, &apiReader{group: withFresh(func(g *ngv1.NodeGroup) {
			delete(g.Annotations, v1alpha1.AnnotationNodeClaimUID)
		})}, false, ReasonNoOwnerClaim, "no NodeClaim UID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fresh, owner, err := ConfirmOrphan(ctx, tc.reader, tc.listed())
			if tc.orphaned {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(owner).To(Equal(&Owner{Name: claim.Name, UID: claim.UID}))
				g.Expect(fresh).To(Equal(tc.reader.group), "the re-read group, whose UID and resourceVersion the delete is conditional on")
				g.Expect(tc.reader.gets).To(Equal(2), "the group and the claim, both read, not assumed")
				return
			}
			g.Expect(fresh).To(BeNil())
			g.Expect(owner).To(BeNil())
			g.Expect(err.Error()).To(ContainSubstring(tc.why))
			if tc.notOwned != "" {
				g.Expect(err).To(MatchError(ErrNotOwned))
				g.Expect(NotOwnedReason(err)).To(Equal(tc.notOwned))
				return
			}
			g.Expect(err).To(MatchError(ErrNotOrphaned))
			g.Expect(errors.Is(err, ErrNotOwned)).To(BeFalse(), "nothing to refuse: the group is ours or gone")
		})
	}

	// A failed read is not a verdict either way.
	for name, reader := range map[string]client.Reader{
		"group read": &apiReader{err: errors.New("connection refused")},
		"claim read": &failClaims{apiReader: &apiReader{group: listed}},
	} {
		t.Run(name+" fails", func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := ConfirmOrphan(ctx, reader, listed.DeepCopy())
			g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
			g.Expect(errors.Is(err, ErrNotOwned) || errors.Is(err, ErrNotOrphaned)).To(BeFalse())
		})
	}
}

// failClaims fails claim reads only.
type failClaims struct{ *apiReader }

func (r *failClaims) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*karpv1.NodeClaim); ok {
		return errors.New("connection refused")
	}
	return r.apiReader.Get(ctx, key, obj, opts...)
}

// patchRecorder is a client.Writer that records patches and refuses every other write.
type patchRecorder struct {
	client.Writer
	patched []*ngv1.NodeGroup
}

func (w *patchRecorder) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	w.patched = append(w.patched, obj.(*ngv1.NodeGroup).DeepCopy())
	return nil
}

// MigrateOwner writes only once the proof holds on the group as re-read and on its claim,
// both uncached; every other case writes nothing.
func TestMigrateOwnerWritesOnlyAProvenGroup(t *testing.T) {
	ctx := context.Background()
	claim := testClaim()
	legacy := Build(claim, testClass(), "M")
	legacy.UID, legacy.ResourceVersion = "group-uid", "7"
	delete(legacy.Annotations, v1alpha1.AnnotationNodeClaimUID)
	legacy.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}}
	changed := func(change func(*ngv1.NodeGroup)) *ngv1.NodeGroup {
		fresh := legacy.DeepCopy()
		fresh.ResourceVersion = "8"
		change(fresh)
		return fresh
	}
	recreated := testClaim()
	recreated.UID = "another-uid"
	for _, tc := range []struct {
		name     string
		listed   func() *ngv1.NodeGroup
		reader   *apiReader
		migrated bool
		notOwned string // the NotOwnedError reason, when the proof refuses the group
	}{
		{"proven", legacy.DeepCopy, &apiReader{group: legacy, claim: claim}, true, ""},
		{"renamed copy", func() *ngv1.NodeGroup {
			copied := legacy.DeepCopy()
			copied.Name = "default-abcde-copy"
			return copied
		}, &apiReader{claim: claim}, false, ReasonNotNamedForItsClaim},
		{"claim gone", legacy.DeepCopy, &apiReader{group: legacy}, false, ReasonOwnerGone},
		{"claim recreated under the same name", legacy.DeepCopy, &apiReader{group: legacy, claim: recreated}, false, ReasonOwnerGone},
		{"annotation names another claim than the owner reference", legacy.DeepCopy, &apiReader{group: changed(func(g *ngv1.NodeGroup) {
			g.Annotations[v1alpha1.AnnotationNodeClaimUID] = "another-uid"
		}), claim: claim}, false, ReasonNotThisClaim},
		{"relabelled since listed", legacy.DeepCopy, &apiReader{group: changed(func(g *ngv1.NodeGroup) {
			g.Labels[v1alpha1.LabelNodeClaim] = "other"
		}), claim: claim}, false, ReasonNotNamedForItsClaim},
		{"no owner reference", func() *ngv1.NodeGroup { return Build(claim, testClass(), "M") }, &apiReader{}, false, ""},
		{"gone since listed", legacy.DeepCopy, &apiReader{claim: claim}, false, ""},
		{"replaced since listed", legacy.DeepCopy, &apiReader{group: changed(func(g *ngv1.NodeGroup) { g.UID = "new-group" }), claim: claim}, false, ""},
		{"terminating", legacy.DeepCopy, &apiReader{group: changed(func(g *ngv1.NodeGroup) { g.DeletionTimestamp = &metav1.Time{} }), claim: claim}, false, ""},
		{"migrated meanwhile", legacy.DeepCopy, &apiReader{group: changed(func(g *ngv1.NodeGroup) {
			g.OwnerReferences = nil
			g.Annotations[v1alpha1.AnnotationNodeClaimUID] = string(claim.UID)
		}), claim: claim}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &patchRecorder{}
			migrated, err := MigrateOwner(ctx, w, tc.reader, tc.listed())
			g.Expect(migrated).To(Equal(tc.migrated))
			if !tc.migrated {
				g.Expect(w.patched).To(BeEmpty(), "written without the proof")
				g.Expect(NotOwnedReason(err)).To(Equal(tc.notOwned))
				if tc.notOwned == "" {
					g.Expect(err).NotTo(HaveOccurred())
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc.reader.gets).To(Equal(2), "the group and its claim, both read, not assumed")
			g.Expect(w.patched).To(HaveLen(1))
			g.Expect(w.patched[0].OwnerReferences).To(BeEmpty())
			g.Expect(w.patched[0].Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
		})
	}
}
