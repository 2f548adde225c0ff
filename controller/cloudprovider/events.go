package cloudprovider

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

// Event reasons are part of the product's interface: users alert on them. Do not rename.
const (
	ReasonQuotaExceeded = "NodeGroupQuotaExceeded"
	// ReasonVanished: a launched group disappeared before its node registered, seen by Create
	// before the operator accepted it, or by garbage collection after.
	ReasonVanished           = "NodeGroupVanished"
	ReasonAcceptanceTimedOut = "NodeGroupAcceptanceTimedOut"
	ReasonDeleteRefused      = "NodeGroupDeleteRefused"
	ReasonQuotaLimited       = "QuotaLimitsFlavors"
	// ReasonWaitingOnQuota is on a pending pod: every flavor that holds it waits on the
	// organisation quota.
	ReasonWaitingOnQuota = "WaitingOnQuota"
	// ReasonRefused: the operator refused a group for a reason the provider cannot classify.
	ReasonRefused = "NodeGroupRefused"
	// ReasonFlavorUnsupported: the apiserver refused the flavor (the served CRD's enum).
	ReasonFlavorUnsupported = "NodeGroupFlavorUnsupported"
	// ReasonTransientFailure: the operator reported a failure it retries on its own.
	ReasonTransientFailure = "NodeGroupTransientFailure"
	// ReasonUpstreamHashUnknown: a group adopted from the upstream provider carries a class
	// hash generation this provider cannot reproduce, so it is not evaluated for drift.
	ReasonUpstreamHashUnknown = "UpstreamHashVersionUnknown"
	// ReasonLegacyLabels: a group adopted from the upstream provider carries keys Karpenter or
	// the provider own in its immutable spec.labels.
	ReasonLegacyLabels = "NodeGroupLegacyLabels"
	// ReasonIllShaped: the node's pods would cost less on smaller nodes of their shape; it is
	// reported drifted, and Karpenter's drift replaces it.
	ReasonIllShaped = "IllShapedForItsPods"
)

// adoptedDedupe is how long the adoption reports stay quiet once published: they describe a
// state that lasts as long as the group, and IsDrifted runs every few minutes.
const adoptedDedupe = 24 * time.Hour

func upstreamHashUnknown(claim *karpv1.NodeClaim, group, version string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonUpstreamHashUnknown,
		Message: fmt.Sprintf("NodeGroup %s, adopted from the upstream provider, is stamped with CleverNodeClass hash version %q, which this provider cannot reproduce: a class change does not drift it; replace it by deleting this NodeClaim when convenient",
			group, version),
		DedupeValues:  []string{string(claim.UID), version},
		DedupeTimeout: adoptedDedupe,
	}
}

func illShapedNode(claim *karpv1.NodeClaim, flavor string, hourly float64, pods int, fleet steering.Fleet) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeNormal,
		Reason:         ReasonIllShaped,
		Message: fmt.Sprintf("Its %d pods would cost %.4f EUR/h on %d smaller nodes of their shape, against %.4f EUR/h for this %s: reported drifted (IllShaped), so Karpenter's drift replaces it within the NodePool's disruption budgets (settings.costReplacement)",
			pods, fleet.Hourly, fleet.Nodes, hourly, flavor),
		DedupeValues:  []string{string(claim.UID)},
		DedupeTimeout: adoptedDedupe,
	}
}

func legacyLabels(claim *karpv1.NodeClaim, group string, keys []string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonLegacyLabels,
		Message: fmt.Sprintf("NodeGroup %s, adopted from the upstream provider, carries %s in its spec.labels, which CKE copies onto every node of the group: never resize it out of band (an extra node carrying karpenter.sh/nodepool without a NodeClaim stalls Karpenter); it is replaced by a clean group when it drifts, expires or is consolidated",
			group, strings.Join(keys, ", ")),
		DedupeValues:  []string{string(claim.UID)},
		DedupeTimeout: adoptedDedupe,
	}
}

func quotaLimited(pool *karpv1.NodePool, blocked []string, headroom quota.Usage) events.Event {
	return events.Event{
		InvolvedObject: pool,
		Type:           corev1.EventTypeNormal,
		Reason:         ReasonQuotaLimited,
		Message: fmt.Sprintf("Organisation quota headroom is %s: flavors %s are not offered now: they do not fit it, would hold fewer of the pending pods in it than the flavors left, reach a use the quota refused (remembered %s), or would be probes while a refused reservation may still leak (%s). Nothing in the cluster shows another cluster freeing quota or a raised quota: the next probe finds it, or raise the quota and set settings.quota",
			quota.FormatHeadroom(headroom), strings.Join(blocked, ", "), quota.RefusalMemory, quota.LeakLifetime),
		DedupeValues:  []string{pool.Name, strings.Join(blocked, ",")},
		DedupeTimeout: 5 * time.Minute,
	}
}

// waitingOnQuotaDedupe is how often a pod is told again that it waits on the quota, with the
// next attempt's time as it is then.
const waitingOnQuotaDedupe = 5 * time.Minute

func waitingOnQuota(pod *corev1.Pod, pool string, size quota.Usage, headroom quota.Usage, s quota.Snapshot) events.Event {
	msg := fmt.Sprintf("Waiting on the organisation quota: NodePool %s holds this pod on a node charging %s at least, which the quota keeps from launching now (headroom %s).", pool, size, quota.FormatHeadroom(headroom))
	if !s.NextProbe.IsZero() {
		msg += fmt.Sprintf(" Next attempt no sooner than %s (until then the reservation of a refused group, or of a group deleted before it was built, may still hold quota upstream).", s.NextProbe.UTC().Format(time.RFC3339))
	}
	for _, r := range s.Refused {
		if r.Use.FitsIn(s.InUse.Add(size)) {
			msg += fmt.Sprintf(" The quota refused a use of %s, not tried again before %s.", r.Use, r.Until.UTC().Format(time.RFC3339))
			break
		}
	}
	msg += " Ends when another cluster of the organisation frees quota or running nodes go; or raise the organisation's quota and set settings.quota, so launches fly at once."
	return events.Event{
		InvolvedObject: pod,
		Type:           corev1.EventTypeNormal,
		Reason:         ReasonWaitingOnQuota,
		Message:        msg,
		DedupeValues:   []string{string(pod.UID)},
		DedupeTimeout:  waitingOnQuotaDedupe,
	}
}

func quotaExceeded(claim *karpv1.NodeClaim, group, flavor, message string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonQuotaExceeded,
		Message:        fmt.Sprintf("Organisation quota refused NodeGroup %s (flavor %s): %s", group, flavor, message),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func nodeGroupVanished(claim *karpv1.NodeClaim, group string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonVanished,
		Message:        fmt.Sprintf("NodeGroup %s disappeared upstream before its node registered", group),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func acceptanceTimedOut(claim *karpv1.NodeClaim, group string, timeout time.Duration) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonAcceptanceTimedOut,
		Message:        fmt.Sprintf("NodeGroup %s got no verdict from the node-group operator within %s; waiting for the node to register", group, timeout),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func deleteRefused(claim *karpv1.NodeClaim, group string, why error) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonDeleteRefused,
		Message:        fmt.Sprintf("Refusing to delete NodeGroup %s: it is not proven to be this NodeClaim's (%s: %v)", group, nodegroup.NotOwnedReason(why), why),
		DedupeValues:   []string{string(claim.UID), group},
	}
}

func nodeGroupRefused(claim *karpv1.NodeClaim, group, flavor, reason, message string, aside time.Duration) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonRefused,
		Message: fmt.Sprintf("The node-group operator refused NodeGroup %s (flavor %s) for a reason the provider does not know (%s): %s; deleting it, and offering the flavor as unavailable for %s",
			group, flavor, reason, message, aside),
		DedupeValues: []string{string(claim.UID)},
	}
}

func flavorUnsupported(claim *karpv1.NodeClaim, flavor string, err error) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonFlavorUnsupported,
		Message:        fmt.Sprintf("The NodeGroup API does not serve flavor %s; offering it as unavailable for %s: %v", flavor, flavorUnsupportedTTL, err),
		DedupeValues:   []string{flavor},
		DedupeTimeout:  flavorUnsupportedTTL,
	}
}

// transientFailure is published by Create and by the launch follower for the same state:
// its dedupe values make the second one a no-op.
func transientFailure(claim *karpv1.NodeClaim, group string, reason, message string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonTransientFailure,
		Message:        fmt.Sprintf("NodeGroup %s: the node-group operator reports %s (%s) and retries on its own; nothing is deleted, Karpenter's registration timeout is the backstop", group, reason, message),
		DedupeValues:   []string{string(claim.UID), reason},
		DedupeTimeout:  10 * time.Minute,
	}
}
