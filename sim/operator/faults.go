package operator

import (
	"strings"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// FaultAnnotation injects faults into one group: a comma-separated list of Fault values.
const FaultAnnotation = "sim.clever-cloud.com/fault"

// Fault is a failure the platform has shown in the field, or one a provider must survive.
type Fault string

const (
	// FaultNeverAccept: the operator never decides; the group gets no status write at all
	// (an operator that is down or stuck).
	FaultNeverAccept Fault = "never-accept"
	// FaultVanishAfterAccept deletes the group upstream VanishDelay after its acceptance,
	// with no event: the object and its nodes disappear (a race at the quota's edge).
	FaultVanishAfterAccept Fault = "vanish-after-accept"
	// FaultNodeNeverReady boots the nodes but their kubelet never reports Ready.
	FaultNodeNeverReady Fault = "node-never-ready"
	// FaultSlowBoot makes the node join SlowBootDelay after creation instead of its drawn join
	// (up to 185 s live); Synced moves by as much as the join passes the typical spread.
	FaultSlowBoot Fault = "slow-boot"
	// FaultUpstreamError makes every upstream call of the group (its creation, each resize)
	// fail for UpstreamErrorDuration from its decision before it goes through: a window of
	// its own, played like the platform-wide one (Options.UpstreamErrorFrom).
	FaultUpstreamError Fault = "upstream-error"
	// FaultLateRefusal accepts the group (Creating), then at its join publishes
	// ReconcileFailed=True reason ProvisioningFailed instead of a node; no node ever joins.
	FaultLateRefusal Fault = "late-refusal"
	// FaultNeverSync leaves the group Creating forever while its node joins.
	FaultNeverSync Fault = "never-sync"
	// FaultNeverSyncNoNode leaves the group Creating forever and no node ever joins.
	FaultNeverSyncNoNode Fault = "never-sync-no-node"
	// FaultUnknownRefusal refuses the creation with a ReconcileFailed reason a provider
	// cannot know (Options.UnknownFailureReason), empty message, as the first status write:
	// shaped like a quota refusal, never preceded by Creating. It takes nothing of the quota.
	FaultUnknownRefusal Fault = "unknown-refusal"
	// FaultDeadLaunch accepts the group (Creating), then at its join, instead of a node,
	// publishes ReconcileInProgress=False and ReconcileFailed=True with
	// Options.UnknownFailureReason, empty messages, and stays so in phase Creating forever: a
	// launch that looks dead. The reservation is held until deletion.
	FaultDeadLaunch Fault = "dead-launch"
)

func faultsOf(g *ngv1.NodeGroup, global []Fault) []Fault {
	raw, ok := g.Annotations[FaultAnnotation]
	if !ok {
		return global
	}
	var out []Fault
	for _, f := range strings.Split(raw, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, Fault(f))
		}
	}
	return out
}
