package preflight

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Placement is what decides where the controller's pods run: their scheduling constraints,
// their requests and how many there are.
type Placement struct {
	// Source says where the placement was read: the installed Deployment, a rendered bundle
	// file, or the bundle's defaults.
	Source   string
	Replicas int32
	Spec     corev1.PodSpec
}

// Bundle defaults, the same as cue/values.cue renders (a test holds them to out/karpenter.yaml).
var (
	// DefaultRequiredAffinity keeps the controller off nodes Karpenter manages.
	DefaultRequiredAffinity = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpDoesNotExist,
	}}}
	// DefaultPreferredAffinity prefers CKE's control-plane nodes where the cluster shows them.
	DefaultPreferredAffinity = corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: ngv1.LabelClusterNodeRole, Operator: corev1.NodeSelectorOpIn, Values: []string{ngv1.NodeRoleControlPlane},
		}},
	}}
	// DefaultTolerations are the conventional control-plane taints.
	DefaultTolerations = []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
	}
)

// DefaultPlacement is the bundle's default placement: two replicas requesting 250m and 256Mi.
func DefaultPlacement() Placement {
	return Placement{
		Source:   "the bundle's defaults",
		Replicas: 2,
		Spec: corev1.PodSpec{
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{DefaultRequiredAffinity}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{DefaultPreferredAffinity},
			}},
			Tolerations: DefaultTolerations,
			Containers: []corev1.Container{{Name: "controller", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			}}}},
		},
	}
}

// PlacementOf reads a Deployment's placement.
func PlacementOf(d *appsv1.Deployment, source string) Placement {
	p := Placement{Source: source, Replicas: 1, Spec: d.Spec.Template.Spec}
	if d.Spec.Replicas != nil {
		p.Replicas = *d.Spec.Replicas
	}
	return p
}

// InstalledPlacement is the placement of this provider's Deployment in the snapshot's
// namespace, if it is installed.
func (s *Snapshot) InstalledPlacement() (Placement, bool) {
	for i := range s.Deployments {
		d := &s.Deployments[i]
		if d.Namespace == s.Namespace && classify(d) == kindOurs {
			return PlacementOf(d, fmt.Sprintf("the installed Deployment %s/%s", d.Namespace, d.Name)), true
		}
	}
	return Placement{}, false
}

// HasControlPlaneNodes says whether the cluster shows CKE control-plane Nodes.
func (s *Snapshot) HasControlPlaneNodes() bool {
	for _, n := range s.Nodes {
		if n.Labels[ngv1.LabelClusterNodeRole] == ngv1.NodeRoleControlPlane {
			return true
		}
	}
	return false
}

// Verdict is where a placement lets the controller run.
type Verdict struct {
	// Eligible nodes, the preferred ones first (by preferred-affinity score), then by name.
	Eligible []string
	// Preferred are the eligible nodes the preferred affinity scores above zero.
	Preferred []string
	// Refused counts the other nodes by the first reason they cannot take a replica.
	Refused map[string][]string
}

// Place evaluates a placement against the snapshot's nodes as the scheduler's filters would:
// Ready and schedulable, node selector and required affinity, NoSchedule and NoExecute taints
// tolerated, and — when pods were read — room for the requests of one replica.
func (s *Snapshot) Place(p Placement) Verdict {
	pod := &corev1.Pod{Spec: p.Spec}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	var preferred *nodeaffinity.PreferredSchedulingTerms
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	requests := podRequests(p.Spec)
	used := map[string]corev1.ResourceList{}
	for _, pd := range s.Pods {
		if pd.Spec.NodeName == "" || pd.Status.Phase == corev1.PodSucceeded || pd.Status.Phase == corev1.PodFailed {
			continue
		}
		add(used, pd.Spec.NodeName, podRequests(pd.Spec))
	}
	v := Verdict{Refused: map[string][]string{}}
	scores := map[string]int64{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		reason := ""
		switch match, err := required.Match(n); {
		case !nodeReady(n):
			reason = "not Ready"
		case n.Spec.Unschedulable:
			reason = "cordoned"
		case n.Labels[karpv1.NodePoolLabelKey] != "" && !match:
			reason = "managed by Karpenter"
		case err != nil:
			reason = "unreadable affinity: " + err.Error()
		case !match:
			reason = "not selected by nodeSelector/affinity"
		default:
			if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false); untolerated {
				reason = "taint " + t.ToString() + " not tolerated"
			} else if s.Pods != nil && !fits(n.Status.Allocatable, used[n.Name], requests) {
				reason = "no room for the requests"
			}
		}
		if reason != "" {
			v.Refused[reason] = append(v.Refused[reason], n.Name)
			continue
		}
		v.Eligible = append(v.Eligible, n.Name)
		if preferred != nil {
			scores[n.Name] = preferred.Score(n)
		}
	}
	sort.SliceStable(v.Eligible, func(i, j int) bool {
		a, b := v.Eligible[i], v.Eligible[j]
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		return a < b
	})
	for _, n := range v.Eligible {
		if scores[n] > 0 {
			v.Preferred = append(v.Preferred, n)
		}
	}
	for _, names := range v.Refused {
		sort.Strings(names)
	}
	return v
}

func checkPlacement(s *Snapshot, p Placement) Check {
	c := Check{Name: CheckPlacement}
	if err := s.errorsFor("nodes"); err != nil {
		c.Result, c.Found = Warn, "not checked: "+err.Error()
		return c
	}
	v := s.Place(p)
	var refused []string
	for reason, names := range v.Refused {
		refused = append(refused, fmt.Sprintf("%d %s (%s)", len(names), reason, strings.Join(limit(names, 3), ", ")))
	}
	sort.Strings(refused)
	topology := "control-plane nodes shown"
	if !s.HasControlPlaneNodes() {
		topology = "worker-only: no control-plane node shown"
	}
	switch {
	case p.Replicas == 0:
		c.Result, c.Found = Warn, fmt.Sprintf("%s asks for 0 replicas: nothing autoscales", p.Source)
		c.Action = "set replicas to 1 or more"
		return c
	case len(v.Eligible) == 0:
		c.Result = Fail
		c.Found = fmt.Sprintf("with %s, no node can run the controller (%s): every replica would stay Pending", p.Source, topology)
		c.Action = "add a NodeGroup Karpenter does not manage (e.g. one S node, no karpenter.sh labels), or change nodeSelector/affinity/tolerations in the values"
	case len(v.Preferred) > 0:
		c.Result = Pass
		c.Found = fmt.Sprintf("with %s, on the preferred node(s) %s", p.Source, strings.Join(limit(v.Preferred, 5), ", "))
		if rest := len(v.Eligible) - len(v.Preferred); rest > 0 {
			c.Found += fmt.Sprintf(", %d other node(s) eligible", rest)
		}
	default:
		c.Result = Pass
		c.Found = fmt.Sprintf("with %s (%s), on node(s) Karpenter does not manage: %s", p.Source, topology, strings.Join(limit(v.Eligible, 5), ", "))
	}
	if len(v.Eligible) == 1 && p.Replicas > 1 {
		c.Found += fmt.Sprintf("; all %d replicas on that one node", p.Replicas)
	}
	if len(refused) > 0 {
		c.Found += "; not on " + strings.Join(refused, ", ")
	}
	return c
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podRequests sums a pod's container requests (init containers aside: the controller has
// none, and the pods it shares a node with hold only their running containers' requests).
func podRequests(spec corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for r, q := range c.Resources.Requests {
			cur := out[r]
			cur.Add(q)
			out[r] = cur
		}
	}
	return out
}

func add(into map[string]corev1.ResourceList, node string, l corev1.ResourceList) {
	cur := into[node]
	if cur == nil {
		cur = corev1.ResourceList{}
		into[node] = cur
	}
	for r, q := range l {
		v := cur[r]
		v.Add(q)
		cur[r] = v
	}
}

// fits says whether requests fit in allocatable less used, for cpu and memory.
func fits(allocatable, used, requests corev1.ResourceList) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		want, ok := requests[r]
		if !ok {
			continue
		}
		free := allocatable[r].DeepCopy()
		free.Sub(used[r])
		if free.Cmp(want) < 0 {
			return false
		}
	}
	return true
}
