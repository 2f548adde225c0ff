package launch

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Event reasons (on the NodeClaim). Part of the product's interface: do not rename. A late
// refusal and a transient failure are recorded by the cloud provider, with its own reasons.
const (
	ReasonRefusedAfterLaunch = "NodeGroupRefusedAfterLaunch"
	ReasonSyncOverdue        = "NodeGroupSyncOverdue"
	ReasonLaunchGivenUp      = "NodeGroupLaunchGivenUp"
)

func refusedAfterLaunch(claim *karpv1.NodeClaim, group string, v nodegroup.Verdict) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonRefusedAfterLaunch,
		Message: fmt.Sprintf("NodeGroup %s was refused after launch (%s: %s); deleted this NodeClaim so Karpenter plans again now instead of waiting out its registration timeout",
			group, v.Reason, v.Message),
		DedupeValues: []string{string(claim.UID)},
	}
}

func syncOverdue(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, age time.Duration) events.Event {
	phase := group.Status.Phase
	if phase == "" {
		phase = "none"
	}
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonSyncOverdue,
		Message: fmt.Sprintf("NodeGroup %s is still not Synced %s after its creation (phase %s); nothing is deleted, Karpenter's registration timeout decides for a node that never registers",
			group.Name, age, phase),
		DedupeValues:  []string{string(claim.UID)},
		DedupeTimeout: time.Hour,
	}
}

func launchGivenUp(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, age time.Duration, rule string, v nodegroup.Verdict) events.Event {
	phase := group.Status.Phase
	if phase == "" {
		phase = "none"
	}
	why := "the operator reports " + v.Outcome.String()
	switch {
	case rule == ruleOperatorStopped:
		why = fmt.Sprintf("the operator stopped working on it: ReconcileInProgress=False, %s: %s", v.Reason, v.Message)
	case v.Outcome == nodegroup.Transient:
		why = fmt.Sprintf("the operator reports %s: %s", v.Reason, v.Message)
	}
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonLaunchGivenUp,
		Message: fmt.Sprintf("NodeGroup %s has no node %s after its creation (phase %s; %s); gave the launch up and deleted this NodeClaim so Karpenter plans again now instead of waiting out its registration timeout",
			group.Name, age, phase, why),
		DedupeValues: []string{string(claim.UID)},
	}
}
