package cloudprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	podutils "sigs.k8s.io/karpenter/pkg/utils/pod"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

// DriftReasonIllShaped is reported for a node whose pods would cost at least
// steering.ReplaceSaving less on the smaller, better-shaped nodes cost steering offers them.
// Karpenter replaces a node with one cheaper node, never with several, so without it a node
// that filled the largest flavor with small CPU-leaning pods stays as it is.
const DriftReasonIllShaped cloudprovider.DriftReason = "IllShaped"

// SetCostReplacement lets the provider report ill-shaped nodes drifted once they have run for
// minNodeAge (settings.costReplacement), or not at all. It needs cost steering: the nodes that
// replace one are those cost steering offers for its pods.
func (c *CloudProvider) SetCostReplacement(on bool, minNodeAge time.Duration) {
	c.look.mu.Lock()
	defer c.look.mu.Unlock()
	c.look.replaceAfter = 0
	if on {
		c.look.replaceAfter = max(minNodeAge, time.Nanosecond)
	}
}

// illShaped says whether the claim's node should be replaced for its shape: Karpenter's drift
// then replaces it, under the NodePool's disruption budgets and do-not-disrupt, with the nodes
// its scheduling simulation plans for the node's pods, an offer steered by them (the pods of
// ill-shaped nodes are planned for with the pending ones: pendingDemand).
//
// A node qualifies only when everything a user set to keep nodes in place allows it: cost
// steering and the replacement on, the node older than the replacement's minimum age (no node,
// a replacement included, is replaced for its shape sooner), its pool consolidating when
// underutilized, without minValues, and Karpenter finding the node consolidatable (the pool's
// consolidateAfter elapsed since its pods last changed), no pod on it that may not be
// disrupted or whose placement depends on other pods (placedTogether); and the nodes that
// would replace it fitting the quota's headroom beside it, since drift launches them before
// the node goes.
func (c *CloudProvider) illShaped(ctx context.Context, claim *karpv1.NodeClaim, flavor string) (cloudprovider.DriftReason, error) {
	c.look.mu.Lock()
	after, costOff := c.look.replaceAfter, c.look.costOff
	c.look.mu.Unlock()
	if after == 0 || costOff || claim.Status.NodeName == "" || c.clock.Since(claim.CreationTimestamp.Time) < after ||
		!claim.StatusConditions().Get(karpv1.ConditionTypeConsolidatable).IsTrue() || claim.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		return "", nil
	}
	pool := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: claim.Labels[karpv1.NodePoolLabelKey]}, pool); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || hasMinValues(pool) {
		return "", nil
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{"spec.nodeName": claim.Status.NodeName}); err != nil {
		return "", err
	}
	its := c.catalog.InstanceTypes()
	var moving []steering.Pod
	var overhead steering.Demand
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case podutils.IsOwnedByDaemonSet(p) && podutils.IsActive(p):
			d := demandOf(p)
			overhead = steering.Demand{MilliCPU: overhead.MilliCPU + d.MilliCPU, Memory: overhead.Memory + d.Memory}
		case !podutils.IsReschedulable(p):
		case !podutils.IsDisruptable(p, c.clock, c.recorder) || placedTogether(p):
			return "", nil
		default:
			moving = append(moving, steering.Pod{Demand: demandOf(p), Allowed: allowedFlavors(p, its)})
		}
	}
	offering := c.instanceType(flavor).Offerings.Cheapest()
	if offering == nil {
		return "", nil
	}
	flavors, _ := c.poolFlavors(pool, its)
	fleet, replace := steering.Replace(flavors, moving, overhead, offering.Price)
	if !replace {
		return "", nil
	}
	headroom, limited := c.quota.Headroom()
	if !limited {
		headroom, limited = c.quota.ProvisionalHeadroom()
	}
	if limited && !fleet.Size.FitsIn(headroom) {
		log.FromContext(ctx).V(1).Info("not replacing an ill-shaped node: its replacement does not fit the quota's headroom",
			"nodeclaim", claim.Name, "flavor", flavor, "replacement", fleet.Size.String(), "headroom", headroom.String())
		return "", nil
	}
	c.recorder.Publish(illShapedNode(claim, flavor, offering.Price, len(moving), fleet))
	return DriftReasonIllShaped, nil
}

// placedTogether says whether where the pod may run depends on other pods (required pod
// affinity or anti-affinity, or a topology spread that refuses to schedule): the packing
// model prices pods alone, so it cannot promise what splitting such a node would cost.
func placedTogether(p *corev1.Pod) bool {
	if a := p.Spec.Affinity; a != nil && (a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 ||
		a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0) {
		return true
	}
	for _, t := range p.Spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

// illShapedNodes names the nodes whose NodeClaims are drifted for their shape. A failed list
// only leaves their pods out of the steering's plan, as before they were reported.
func illShapedNodes(ctx context.Context, kube client.Client) map[string]bool {
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).V(1).Info("cannot list NodeClaims, planning for pending pods only", "error", err.Error())
		return nil
	}
	out := map[string]bool{}
	for i := range claims.Items {
		c := &claims.Items[i]
		if cond := c.StatusConditions().Get(karpv1.ConditionTypeDrifted); c.Status.NodeName != "" && cond.IsTrue() && cond.Reason == string(DriftReasonIllShaped) {
			out[c.Status.NodeName] = true
		}
	}
	return out
}
