package inspect

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	cp "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
)

// The kinds of reason a flavor is excluded for, the first word of each reason: stable, for
// scripts and tests.
const (
	ExcludedByPool         = "nodepool"
	ExcludedByRequirements = "requirements"
	ExcludedByResources    = "resources"
	ExcludedByLimits       = "limits"
	ExcludedByQuota        = "quota"
	ExcludedUnavailable    = "unavailable"
)

// Explanation is explain's answer: which NodePools and flavors could hold a pod, which are
// excluded and why, and what the cheapest node would cost.
type Explanation struct {
	Pod string `json:"pod"`
	// State is where the pod stands: "running on node N", "pending", "nominated to …".
	State    string            `json:"state"`
	Requests map[string]string `json:"requests"`
	Pools    []PoolVerdict     `json:"nodePools"`
	// Cheapest is the cheapest node that could hold the pod now, in the heaviest NodePool that
	// can (Karpenter's order); nil when none can.
	Cheapest *Choice `json:"cheapest,omitempty"`
	// CheapestBeyondQuota is the cheapest that only the quota keeps out, when it is cheaper
	// than Cheapest or there is none.
	CheapestBeyondQuota *Choice `json:"cheapestBeyondQuota,omitempty"`
	// Notes are what explain could not read, and what it does not model.
	Notes []string `json:"notes,omitempty"`
}

// PoolVerdict is one NodePool's part.
type PoolVerdict struct {
	Name string `json:"name"`
	// Weight is the pool's spec.weight: Karpenter tries the heaviest pools first.
	Weight int32 `json:"weight,omitempty"`
	// Excluded says why the pool as a whole cannot hold the pod; empty when some flavor may.
	Excluded string          `json:"excluded,omitempty"`
	Flavors  []FlavorVerdict `json:"flavors,omitempty"`
}

// FlavorVerdict is one flavor of a pool.
type FlavorVerdict struct {
	Name        string  `json:"name"`
	PriceHourly float64 `json:"priceHourly"`
	// Excluded are the reasons the flavor cannot hold the pod now, each "kind: details";
	// empty when it can.
	Excluded []string `json:"excluded,omitempty"`
}

// Choice is a flavor of a pool and its price.
type Choice struct {
	Pool        string  `json:"nodePool"`
	Flavor      string  `json:"flavor"`
	PriceHourly float64 `json:"priceHourly"`
	weight      int32
}

// before says whether c comes before o in Karpenter's order: the heavier pool, then the
// cheaper flavor.
func (c *Choice) before(o *Choice) bool {
	if o == nil {
		return true
	}
	if c.weight != o.weight {
		return c.weight > o.weight
	}
	return c.PriceHourly < o.PriceHourly
}

// Explain explains where pod could go, from what s read.
func Explain(s *State, pod *corev1.Pod) Explanation {
	e := Explanation{Pod: pod.Namespace + "/" + pod.Name, State: podState(s, pod), Requests: map[string]string{}}
	requests := resources.RequestsForPods(pod)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := requests[r]; ok {
			e.Requests[string(r)] = q.String()
		}
	}
	if s.Catalog == nil {
		e.Notes = append(e.Notes, "no flavor catalogue: "+errorsText(s))
		return e
	}
	unavailable := unavailableFlavors(s)
	podReqs := scheduling.NewStrictPodRequirements(pod)
	for i := range s.NodePools {
		pv := explainPool(s, &s.NodePools[i], pod, podReqs, requests, unavailable)
		e.Pools = append(e.Pools, pv)
		for _, f := range pv.Flavors {
			choice := &Choice{Pool: pv.Name, Flavor: f.Name, PriceHourly: f.PriceHourly, weight: pv.Weight}
			if len(f.Excluded) == 0 && choice.before(e.Cheapest) {
				e.Cheapest = choice
			}
			if onlyQuota(f.Excluded) && choice.before(e.CheapestBeyondQuota) {
				e.CheapestBeyondQuota = choice
			}
		}
	}
	if e.CheapestBeyondQuota != nil && e.Cheapest != nil && !e.CheapestBeyondQuota.before(e.Cheapest) {
		e.CheapestBeyondQuota = nil
	}
	if len(s.NodePools) == 0 {
		e.Notes = append(e.Notes, "no NodePool: Karpenter launches nothing")
	}
	if s.Snapshot == nil {
		e.Notes = append(e.Notes, "no saved quota state (ConfigMap "+s.Namespace+"/karpenter-clevercloud-quota): the quota is not judged")
	}
	e.Notes = append(e.Notes, "requests are the pod's own: DaemonSets add theirs on every new node")
	return e
}

func onlyQuota(reasons []string) bool {
	return len(reasons) > 0 && !slices.ContainsFunc(reasons, func(r string) bool { return !strings.HasPrefix(r, ExcludedByQuota+":") })
}

// podState says where the pod stands.
func podState(s *State, pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		for _, n := range s.Nodes {
			if n.Name == pod.Spec.NodeName && n.Labels[karpv1.NodePoolLabelKey] != "" {
				return fmt.Sprintf("%s on node %s (NodePool %s, flavor %s)", pod.Status.Phase, n.Name, n.Labels[karpv1.NodePoolLabelKey], n.Labels[corev1.LabelInstanceTypeStable])
			}
		}
		return fmt.Sprintf("%s on node %s", pod.Status.Phase, pod.Spec.NodeName)
	}
	if r := pendingReason(s, pod); r.Reason != "" {
		return fmt.Sprintf("%s, not scheduled; latest %s: %s", pod.Status.Phase, r.Reason, r.Message)
	}
	return fmt.Sprintf("%s, not scheduled", pod.Status.Phase)
}

// explainPool judges a pool as a whole, then each of its flavors, the way Karpenter and the
// provider do: the pool's template requirements and taints against the pod, each flavor's
// requirements against both, its allocatable against the pod's requests, its capacity
// against what is left of the pool's limits, its quota charge against the saved quota state,
// and the refusals that set it aside.
func explainPool(s *State, pool *karpv1.NodePool, pod *corev1.Pod, podReqs scheduling.Requirements, requests corev1.ResourceList, unavailable map[string]setAside) PoolVerdict {
	pv := PoolVerdict{Name: pool.Name, Weight: lo.FromPtr(pool.Spec.Weight)}
	if why := classProblem(s, pool); why != "" {
		pv.Excluded = why
		return pv
	}
	if err := scheduling.Taints(pool.Spec.Template.Spec.Taints).ToleratesPod(pod); err != nil {
		pv.Excluded = fmt.Sprintf("%s: the pod does not tolerate the NodePool's taints: %v", ExcludedByRequirements, err)
		return pv
	}
	poolReqs := scheduling.NewNodeSelectorRequirementsWithMinValues(pool.Spec.Template.Spec.Requirements...)
	poolReqs.Add(scheduling.NewLabelRequirements(lo.Assign(pool.Spec.Template.Labels, map[string]string{karpv1.NodePoolLabelKey: pool.Name})).Values()...)
	if err := poolReqs.Compatible(podReqs, scheduling.AllowUndefinedWellKnownLabels); err != nil {
		pv.Excluded = fmt.Sprintf("%s: the pod's do not meet the NodePool's: %v", ExcludedByRequirements, err)
		return pv
	}
	remaining := remainingLimits(pool)
	for _, it := range s.Catalog.InstanceTypes() {
		price, _ := s.price(it.Name)
		fv := FlavorVerdict{Name: it.Name, PriceHourly: price}
		if err := it.Requirements.Intersects(poolReqs); err != nil {
			fv.Excluded = append(fv.Excluded, fmt.Sprintf("%s: not allowed by the NodePool (%v)", ExcludedByPool, err))
			pv.Flavors = append(pv.Flavors, fv)
			continue
		}
		if err := it.Requirements.Intersects(podReqs); err != nil {
			fv.Excluded = append(fv.Excluded, fmt.Sprintf("%s: %v", ExcludedByRequirements, err))
		}
		if alloc := it.Allocatable(); !resources.Fits(requests, alloc) {
			fv.Excluded = append(fv.Excluded, fmt.Sprintf("%s: the pod requests %s, a %s has %s allocatable", ExcludedByResources, cpuMemory(requests), it.Name, cpuMemory(alloc)))
		}
		if why := beyondLimits(it, remaining); why != "" {
			fv.Excluded = append(fv.Excluded, ExcludedByLimits+": "+why)
		}
		if f, ok := s.Catalog.Flavor(it.Name); ok && s.Used != nil {
			if why := quotaVerdict(s.Snapshot, *s.Used, f.QuotaCharge(), s.Now); why != "" {
				fv.Excluded = append(fv.Excluded, ExcludedByQuota+": "+why)
			}
		}
		if a, ok := unavailable[it.Name]; ok && s.Now.Before(a.Until) {
			fv.Excluded = append(fv.Excluded, fmt.Sprintf("%s: %s, until %s", ExcludedUnavailable, a.Why, stamp(a.Until)))
		}
		pv.Flavors = append(pv.Flavors, fv)
	}
	return pv
}

// classProblem says why a pool's CleverNodeClass launches nothing; empty when it is Ready.
func classProblem(s *State, pool *karpv1.NodePool) string {
	ref := pool.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Kind != v1alpha1.NodeClassKind {
		return fmt.Sprintf("%s: its nodeClassRef is not a %s", ExcludedByPool, v1alpha1.NodeClassKind)
	}
	for i := range s.NodeClasses {
		nc := &s.NodeClasses[i]
		if nc.Name != ref.Name {
			continue
		}
		if ready := nc.StatusConditions().Root(); ready == nil || !ready.IsTrue() {
			// Ready's own message only names the dependents; theirs say why.
			var why []string
			for _, c := range nc.Status.Conditions {
				if c.Type != v1alpha1.ConditionPricesCurrent && c.Type != "Ready" && c.Status != metav1.ConditionTrue {
					why = append(why, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
				}
			}
			if len(why) == 0 {
				why = append(why, "no Ready condition yet")
			}
			return fmt.Sprintf("%s: CleverNodeClass %s is not Ready (%s)", ExcludedByPool, nc.Name, strings.Join(why, "; "))
		}
		return ""
	}
	return fmt.Sprintf("%s: CleverNodeClass %s does not exist", ExcludedByPool, ref.Name)
}

// remainingLimits is what is left of the pool's limits (nil when it has none), from the
// resources its status counts, as Karpenter's scheduler computes it.
func remainingLimits(pool *karpv1.NodePool) corev1.ResourceList {
	if len(pool.Spec.Limits) == 0 {
		return nil
	}
	return resources.Subtract(corev1.ResourceList(pool.Spec.Limits), pool.Status.Resources)
}

// beyondLimits says how a node of the flavor would exceed what is left of the pool's limits,
// as Karpenter's scheduler filters instance types (its capacity, not its allocatable).
func beyondLimits(it *cloudprovider.InstanceType, remaining corev1.ResourceList) string {
	var over []string
	for _, name := range slices.Sorted(maps.Keys(remaining)) {
		left := remaining[name]
		if c := it.Capacity[name]; resources.Cmp(c, left) > 0 {
			over = append(over, fmt.Sprintf("%s %s, %s left", name, c.String(), left.String()))
		}
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("a %s would exceed the NodePool's limits: it adds %s", it.Name, strings.Join(over, "; "))
}

func cpuMemory(l corev1.ResourceList) string {
	cpu, mem := l[corev1.ResourceCPU], l[corev1.ResourceMemory]
	return fmt.Sprintf("cpu %s, memory %s", cpu.String(), humanBytes(mem))
}

// humanBytes writes memory in GiB with one decimal, as people compare flavors.
func humanBytes(q resource.Quantity) string {
	return fmt.Sprintf("%.1fGi", float64(q.Value())/(1<<30))
}

// setAside is a flavor the controller set aside after a refusal that is not the quota's.
type setAside struct {
	Why   string
	Until time.Time
}

var (
	flavorIn        = regexp.MustCompile(`flavor ([A-Z0-9][A-Z0-9_-]*)`)
	unavailableTime = regexp.MustCompile(`unavailable for ([0-9][0-9hms.]*)`)
)

// unavailableFlavors are the flavors the controller set aside, from the events that said so
// (NodeGroupFlavorUnsupported, NodeGroupRefused), each until its event's time plus the time it
// named: the controller keeps these in memory only.
func unavailableFlavors(s *State) map[string]setAside {
	out := map[string]setAside{}
	for _, ev := range s.Events {
		if ev.Reason != cp.ReasonFlavorUnsupported && ev.Reason != cp.ReasonRefused {
			continue
		}
		f, d := flavorIn.FindStringSubmatch(ev.Message), unavailableTime.FindStringSubmatch(ev.Message)
		if f == nil || d == nil {
			continue
		}
		ttl, err := time.ParseDuration(d[1])
		if err != nil {
			continue
		}
		until := eventTime(ev).Add(ttl)
		if cur, ok := out[f[1]]; !ok || until.After(cur.Until) {
			out[f[1]] = setAside{Why: ev.Reason + " on " + strings.ToLower(ev.InvolvedObject.Kind) + " " + ev.InvolvedObject.Name, Until: until}
		}
	}
	return out
}

// errorsText lists the reads that failed.
func errorsText(s *State) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.Errors)) {
		out = append(out, fmt.Sprintf("%s: %v", k, s.Errors[k]))
	}
	return strings.Join(out, "; ")
}
