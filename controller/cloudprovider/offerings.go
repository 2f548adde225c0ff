package cloudprovider

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	podutils "sigs.k8s.io/karpenter/pkg/utils/pod"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

// GetInstanceTypes implements cloudprovider.CloudProvider: every flavor, with the ones that
// do not fit the quota's headroom, or that the quota just refused, offered as unavailable.
// Steering (package steering) then sets aside, as unavailable too, the flavors it does not
// want this scheduling pass to use: when the headroom binds, those that would hold fewer of the
// pending pods in it; else, with cost steering on, those whose packing would cost more for the
// pending pods than a fleet of smaller, better-shaped nodes.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	anySize := nodePool != nil && hasMinValues(nodePool)
	its, blocked, headroom := c.instanceTypes(anySize)
	if nodePool != nil {
		d, hidden, h := c.steer(ctx, nodePool, its, headroom)
		// The steering's look at the pending pods bounds probes to the smallest flavor one of
		// them can use (ProbeAtMost). What that rules out now is what Create will refuse: left
		// offered, core packs a small pod beside a large one onto the large flavor pass after
		// pass, each pass coming once the last look's bound has lapsed, and the small pod never
		// gets its probe.
		now, _ := c.blockedFlavors(anySize)
		if newly := slices.DeleteFunc(now, func(name string) bool { return slices.Contains(blocked, name) }); len(newly) > 0 {
			its = unavailableFlavors(its, newly)
			blocked = append(blocked, newly...)
		}
		if len(hidden) > 0 {
			its = unavailableFlavors(its, hidden)
			if d.Reason == steering.QuotaHeadroom || d.Reason == steering.AssumedQuota {
				blocked = append(blocked, hidden...)
				headroom = h
			}
		}
	}
	if len(blocked) > 0 && nodePool != nil {
		c.recorder.Publish(quotaLimited(nodePool, blocked, headroom))
	}
	return its, nil
}

// instanceTypes returns the catalogue with unavailable offerings for the flavors the quota
// rules out, the names of those flavors, and the headroom they were judged against. With
// anySize (a pool or claim with minValues), a probe may be any flavor, not only the smallest a
// pending pod can use.
func (c *CloudProvider) instanceTypes(anySize bool) ([]*cloudprovider.InstanceType, []string, quota.Usage) {
	blocked, headroom := c.blockedFlavors(anySize)
	return unavailableFlavors(c.catalog.InstanceTypes(), blocked), blocked, headroom
}

// blockedFlavors names the flavors instanceTypes offers as unavailable and the headroom they
// were judged against, without copying any instance type.
func (c *CloudProvider) blockedFlavors(anySize bool) ([]string, quota.Usage) {
	blockedBy := c.quota.Blocked
	if anySize {
		blockedBy = c.quota.BlockedAnySize
	}
	marked := c.rejected.snapshot()
	headroom, limited := c.quota.Headroom()
	var blocked []string
	for _, it := range c.catalog.InstanceTypes() {
		if marked[it.Name] || (limited && !c.fits(it.Name, headroom)) || blockedBy(c.size(it.Name)) {
			blocked = append(blocked, it.Name)
		}
	}
	return blocked, headroom
}

// unavailableFlavors returns its with every offering of the named flavors unavailable. The
// catalogue's instance types are shared: the changed ones are copies.
func unavailableFlavors(its []*cloudprovider.InstanceType, names []string) []*cloudprovider.InstanceType {
	if len(names) == 0 {
		return its
	}
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		if !slices.Contains(names, it.Name) {
			out[i] = it
			continue
		}
		offerings := make(cloudprovider.Offerings, len(it.Offerings))
		for j, o := range it.Offerings {
			oc := *o
			oc.Available = false
			offerings[j] = &oc
		}
		out[i] = &cloudprovider.InstanceType{Name: it.Name, Requirements: it.Requirements, Capacity: it.Capacity, Overhead: it.Overhead, Offerings: offerings}
	}
	return out
}

// steeringTTL is how long one look at the pending pods serves GetInstanceTypes, which
// Karpenter calls on every scheduling pass and for every NodePool (and many times more while
// it simulates consolidation), at most. A scheduling pass starts once no new pending pod came
// for core's batch idle duration, so a look younger than that saw every pod of the pass:
// SetBatchIdleDuration keeps the time-to-live under it. A look older than the last pod's
// arrival steered twelve pods by three of them, and an M took the quota's memory with two
// pods left that no flavor could then hold. A look that found no pending pod serves only
// steeringIdleTTL: pods the scheduler has just marked unschedulable must not be missed by the
// scheduling pass they start.
const steeringTTL = 2 * time.Second

const steeringIdleTTL = 200 * time.Millisecond

// pendingLook caches a look at the pending pods and the steering decided from it.
type pendingLook struct {
	mu sync.Mutex
	// ttl is how long a look with pending pods serves; steeringTTL when zero.
	ttl time.Duration
	// costOff turns cost steering off (settings.costSteering false).
	costOff bool
	// replaceAfter is how long a node runs before it may be replaced for its shape; zero
	// replaces none (settings.costReplacement).
	replaceAfter time.Duration
	at           time.Time
	pendingLookResult
	// decided are the decisions, by NodePool, with the quota view they were made against,
	// until the next look at the pods.
	decided map[string]decided
}

type decided struct {
	headroom quota.Usage
	view     steering.QuotaView
	decision steering.Decision
	hidden   []string
}

// steer returns the steering decision for the pool's scheduling pass (steering.Decide), the
// flavors it sets aside, and the headroom the quota's part was judged against: with a limit
// in force, its headroom; with the limit not known yet, the headroom CKE's default leaves
// (probes find whether the quota was raised when the pods need more); for a pool with
// minValues, no quota steering (it would fail on fewer flavors; a probe costs less).
func (c *CloudProvider) steer(ctx context.Context, pool *karpv1.NodePool, its []*cloudprovider.InstanceType, headroom quota.Usage) (steering.Decision, []string, quota.Usage) {
	none := steering.Decision{Reason: steering.Unsteered}
	if c.kube == nil {
		return none, nil, headroom
	}
	view := steering.QuotaOpen
	if _, limited := c.quota.Headroom(); limited {
		view = steering.QuotaLimited
	} else if h, provisional := c.quota.ProvisionalHeadroom(); provisional {
		headroom = h
		view = steering.QuotaAssumed
	}
	minValues := hasMinValues(pool)
	if minValues && view == steering.QuotaAssumed {
		view = steering.QuotaOpen
	}
	s := &c.look
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl := steeringTTL
	if s.ttl > 0 {
		ttl = s.ttl
	}
	if len(s.pending) == 0 {
		ttl = min(ttl, steeringIdleTTL)
	}
	if s.decided == nil || c.clock.Since(s.at) >= ttl {
		look, err := pendingDemand(ctx, c.kube, c.catalog.InstanceTypes())
		if err != nil {
			log.FromContext(ctx).V(1).Info("cannot list pending pods, not steering", "error", err.Error())
			return none, nil, headroom
		}
		s.at, s.pendingLookResult, s.decided = c.clock.Now(), look, map[string]decided{}
	}
	if d, ok := s.decided[pool.Name]; ok && d.headroom == headroom && d.view == view {
		return d.decision, d.hidden, headroom
	}
	flavors, all := c.poolFlavors(pool, its)
	demands := make([]steering.Demand, len(s.pending))
	for i, p := range s.pending {
		demands[i] = p.Demand
	}
	if view != steering.QuotaOpen {
		if smallest, ok := steering.SmallestWanted(all, demands, s.overhead); ok {
			c.quota.ProbeAtMost(smallest)
		}
		c.reportWaitingOnQuota(pool, all, demands, s.pods, s.overhead, headroom)
	}
	// The pods of nodes being replaced for their shape are planned for with the pending ones:
	// the replacement's scheduling simulation asks for this offer too, and is steered by it.
	planned := poolPods(pool, append(slices.Clip(s.pending), s.moving...), append(slices.Clip(s.constraints), s.movingConstraints...))
	d := steering.Decide(steering.Input{
		Flavors: flavors, Pods: s.pending, PoolPods: planned, Overhead: s.overhead,
		Quota: view, Headroom: headroom, Cost: !s.costOff && !minValues,
	})
	hidden := d.Hidden(flavors)
	s.decided[pool.Name] = decided{headroom: headroom, view: view, decision: d, hidden: hidden}
	steering.Record(pool.Name, d, len(hidden))
	if d.Reason != steering.Unsteered {
		log.FromContext(ctx).V(1).Info("steering the scheduling pass", "nodepool", pool.Name, "reason", string(d.Reason),
			"offered", d.Keep, "hidden", hidden, "pendingPods", len(s.pending), "movingPods", len(s.moving),
			"expectedNodes", d.Steered.Nodes, "expectedHourly", d.Steered.Hourly,
			"unsteeredNodes", d.Unsteered.Nodes, "unsteeredHourly", d.Unsteered.Hourly)
	}
	return d, hidden, headroom
}

// poolFlavors are the pool's flavors that its requirements allow: offered, those available
// (priced by their cheapest available offering), and all, offered or not (what a pod can use
// at all).
func (c *CloudProvider) poolFlavors(pool *karpv1.NodePool, its []*cloudprovider.InstanceType) (offered, all []steering.Flavor) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(pool.Spec.Template.Spec.Requirements...)
	for _, it := range its {
		if !reqs.IsCompatible(it.Requirements, scheduling.AllowUndefinedWellKnownLabels) {
			continue
		}
		alloc := it.Allocatable()
		f := steering.Flavor{
			Name: it.Name, Size: c.size(it.Name), Pods: alloc.Pods().Value(),
			Allocatable: steering.Demand{MilliCPU: alloc.Cpu().MilliValue(), Memory: alloc.Memory().Value()},
		}
		all = append(all, f)
		if available := it.Offerings.Available(); len(available) > 0 {
			f.Price = available.Cheapest().Price
			offered = append(offered, f)
		}
	}
	return offered, all
}

// SetCostSteering turns cost steering on (the default) or off (settings.costSteering).
func (c *CloudProvider) SetCostSteering(on bool) {
	c.look.mu.Lock()
	defer c.look.mu.Unlock()
	c.look.costOff = !on
	c.look.decided = nil
}

// SetBatchIdleDuration keeps a look at the pending pods younger than core's batch idle
// duration (BATCH_IDLE_DURATION), so a scheduling pass is steered by every pod it places: half
// of it, at most steeringTTL.
func (c *CloudProvider) SetBatchIdleDuration(idle time.Duration) {
	c.look.mu.Lock()
	defer c.look.mu.Unlock()
	c.look.ttl = min(steeringTTL, max(idle/2, time.Millisecond))
}

func hasMinValues(pool *karpv1.NodePool) bool {
	return slices.ContainsFunc(pool.Spec.Template.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
		return r.MinValues != nil
	})
}

// podConstraints are what decides whether a NodePool can take a pending pod: its node
// selector and required node affinity, and its tolerations.
type podConstraints struct {
	requirements scheduling.Requirements
	tolerations  []corev1.Toleration
}

// pendingLookResult is one look at the cluster's pods.
type pendingLookResult struct {
	pending []steering.Pod
	// pods are the pending pods, in the order of pending.
	pods []*corev1.Pod
	// constraints are what decides which NodePools can take each pending pod, in the order
	// of pending.
	constraints []podConstraints
	// moving are the pods of nodes reported drifted for their shape (DriftReasonIllShaped),
	// with what decides which NodePools can take them: pods Karpenter's drift will move.
	moving            []steering.Pod
	movingConstraints []podConstraints
	overhead          steering.Demand
}

// pendingDemand lists, through the cache, the pods waiting for new capacity (as Karpenter
// selects them) with what they request, the flavors their requirements allow and what
// decides which NodePools can take them, and the daemon sets' requests on a node (the median
// over nodes that run any, so a control-plane node's extras do not count).
func pendingDemand(ctx context.Context, kube client.Client, its []*cloudprovider.InstanceType) (pendingLookResult, error) {
	var look pendingLookResult
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return look, fmt.Errorf("listing pods: %w", err)
	}
	illShaped := illShapedNodes(ctx, kube)
	daemons := map[string]steering.Demand{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		switch {
		case illShaped[p.Spec.NodeName] && podutils.IsReschedulable(p):
			look.moving = append(look.moving, steering.Pod{Demand: demandOf(p), Allowed: allowedFlavors(p, its)})
			look.movingConstraints = append(look.movingConstraints, podConstraints{requirements: scheduling.NewStrictPodRequirements(p), tolerations: p.Spec.Tolerations})
		case podutils.IsProvisionable(p):
			look.pending = append(look.pending, steering.Pod{Demand: demandOf(p), Allowed: allowedFlavors(p, its)})
			// Only what an event names: the cache's pod is shared.
			look.pods = append(look.pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}})
			look.constraints = append(look.constraints, podConstraints{requirements: scheduling.NewStrictPodRequirements(p), tolerations: p.Spec.Tolerations})
		case podutils.IsOwnedByDaemonSet(p) && p.Spec.NodeName != "" && !podutils.IsTerminal(p):
			d, r := daemons[p.Spec.NodeName], demandOf(p)
			daemons[p.Spec.NodeName] = steering.Demand{MilliCPU: d.MilliCPU + r.MilliCPU, Memory: d.Memory + r.Memory}
		}
	}
	if len(daemons) > 0 {
		per := slices.Collect(maps.Values(daemons))
		slices.SortFunc(per, func(a, b steering.Demand) int { return cmp.Compare(a.MilliCPU+a.Memory>>20, b.MilliCPU+b.Memory>>20) })
		look.overhead = per[len(per)/2]
	}
	return look, nil
}

// poolPods are the pending pods the pool can take: its requirements and labels (its own name
// included) compatible with the pod's, its taints tolerated. Pods only another pool can take
// do not shape this pool's offer.
func poolPods(pool *karpv1.NodePool, pending []steering.Pod, constraints []podConstraints) []steering.Pod {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(pool.Spec.Template.Spec.Requirements...)
	reqs.Add(scheduling.NewLabelRequirements(pool.Spec.Template.Labels).Values()...)
	reqs.Add(scheduling.NewLabelRequirements(map[string]string{karpv1.NodePoolLabelKey: pool.Name}).Values()...)
	taints := scheduling.Taints(pool.Spec.Template.Spec.Taints)
	var out []steering.Pod
	for i, p := range pending {
		if i >= len(constraints) {
			break
		}
		if reqs.Compatible(constraints[i].requirements, scheduling.AllowUndefinedWellKnownLabels) != nil || taints.Tolerates(constraints[i].tolerations) != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}

// allowedFlavors names the flavors whose labels the pod's node selector and required node
// affinity accept, nil when they accept every flavor. Only keys a flavor defines are judged
// (instance type, its CPU and memory, zone, capacity type, architecture): a key a NodePool
// adds is the pool's business, and each pool's own requirements were applied before.
func allowedFlavors(p *corev1.Pod, its []*cloudprovider.InstanceType) []string {
	if len(p.Spec.NodeSelector) == 0 && (p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil ||
		p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return nil
	}
	podReqs := scheduling.NewStrictPodRequirements(p)
	allowed := make([]string, 0, len(its))
	for _, it := range its {
		ok := true
		for key := range podReqs {
			if it.Requirements.Has(key) && !it.Requirements.Get(key).HasIntersection(podReqs.Get(key)) {
				ok = false
				break
			}
		}
		if ok {
			allowed = append(allowed, it.Name)
		}
	}
	if len(allowed) == len(its) {
		return nil
	}
	return allowed
}

// reportWaitingOnQuota tells each pending pod that the pool could hold, but only with a
// flavor the quota keeps from launching now, that it waits on the quota, when the next attempt
// comes and what ends the wait: the question a user asks first, answered where kubectl
// describe shows it.
func (c *CloudProvider) reportWaitingOnQuota(pool *karpv1.NodePool, flavors []steering.Flavor, pending []steering.Demand, pods []*corev1.Pod, overhead steering.Demand, headroom quota.Usage) {
	var snap *quota.Snapshot
	for i, d := range pending {
		if i >= len(pods) {
			return
		}
		size, ok := steering.SmallestWanted(flavors, []steering.Demand{d}, overhead)
		if !ok || !c.quota.Blocked(size) {
			continue
		}
		if snap == nil {
			s := c.quota.Snapshot()
			snap = &s
		}
		c.recorder.Publish(waitingOnQuota(pods[i], pool.Name, size, headroom, *snap))
	}
}

func demandOf(p *corev1.Pod) steering.Demand {
	r := resources.RequestsForPods(p)
	return steering.Demand{MilliCPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}
}

// size is what a node of the flavor charges to the organisation quota; nothing for a flavor
// the catalogue does not have.
func (c *CloudProvider) size(flavor string) quota.Usage {
	f, ok := c.catalog.Flavor(flavor)
	if !ok {
		return quota.Usage{}
	}
	return f.QuotaCharge()
}

func (c *CloudProvider) fits(flavor string, headroom quota.Usage) bool {
	return c.size(flavor).FitsIn(headroom)
}

// quotaRejected handles a refusal by the organisation quota, whether Create saw it or it was
// published after Create returned: the tracker infers what it can (the limit, when an older
// cluster still says it; else bounds from the use the launch would have brought), the flavors
// at least as large are offered as unavailable for a while, and the group is deleted.
func (c *CloudProvider) quotaRejected(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, it *cloudprovider.InstanceType, message string) error {
	said, parsed := nodegroup.ParseQuotaMessage(message)
	if parsed {
		c.quota.Learn(said.Resource, said.Limit)
	}
	inferred := c.quota.Refused(group.Name, c.size(it.Name))
	// The tracker rules out the refused use and beyond, and holds probes while the refused
	// group's reservation may leak: the flavors that would be refused again are offered as
	// unavailable from its memory (Blocked), so none is marked here.
	resource := inferred.Resource
	if parsed {
		resource = said.Resource // the message says which resource ran out
	}
	if resource == "" {
		resource = quota.ResourceUnknown
	}
	quotaRejections.WithLabelValues(it.Name, resource).Inc()
	what := fmt.Sprintf("it would have brought the use to at most %s; launches that would bring it that far in both resources are not made for %s", inferred.Point, inferred.For)
	if inferred.Misconfigured {
		what = fmt.Sprintf("it would have brought the use to at most %s, within the configured limit: settings.quota is wrong (the organisation's quota was lowered, or another of its clusters uses part of it); correct or remove it", inferred.Point)
	}
	if inferred.Limit != (quota.Limit{}) {
		what += fmt.Sprintf(", and the limit is known to be at most %s", inferred.Limit)
	}
	if parsed {
		what += "; the platform said: " + message
	}
	c.recorder.Publish(quotaExceeded(claim, group.Name, it.Name, what))
	log.FromContext(ctx).Info("organisation quota refused the nodegroup, deleting it", "message", message,
		"resource", resource, "point", inferred.Point.String(), "limit", inferred.Limit.String())
	c.deleteRefusedGroup(ctx, claim, group)
	return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodegroup %q: Quota exceeded (flavor %s): %s", group.Name, it.Name, what))
}
