package garbagecollection

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
)

// Event reasons (on the NodeGroup). Part of the product's interface: do not rename. A claim
// fast-failed because its group vanished gets the cloud provider's cloudprovider.ReasonVanished,
// the reason Create gives a group that vanishes before it is accepted.
const (
	ReasonRefused = "NodeGroupGarbageCollectionRefused"
	ReasonReaped  = "NodeGroupGarbageCollected"
	ReasonResized = "NodeGroupResizedOutOfBand"
)

// A refused or resized group is published on every pass and deduplicated by the recorder for
// remind, so it is reported when first found and again every remind while it stays so.

func resizedOutOfBand(g *ngv1.NodeGroup, remind time.Duration) events.Event {
	return events.Event{
		InvolvedObject: g,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonResized,
		Message:        fmt.Sprintf("nodeCount is %d, Karpenter manages one-node groups; leaving it alone (only node0 has a provider ID)", g.Spec.NodeCount),
		DedupeValues:   []string{string(g.UID)},
		DedupeTimeout:  remind,
	}
}

func refusedWithoutOwner(g *ngv1.NodeGroup, remind time.Duration) events.Event {
	return events.Event{
		InvolvedObject: g,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonRefused,
		Message:        fmt.Sprintf("carries the provider's labels but names no NodeClaim (annotation %s); not deleting it", v1alpha1.AnnotationNodeClaimUID),
		DedupeValues:   []string{string(g.UID)},
		DedupeTimeout:  remind,
	}
}

// refusedNotOwned reports a group that names a claim but is not proven to be that claim's:
// a copy under another name, typically.
func refusedNotOwned(g *ngv1.NodeGroup, reason string, why error, remind time.Duration) events.Event {
	return events.Event{
		InvolvedObject: g,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonRefused,
		Message:        fmt.Sprintf("carries the provider's labels but is not proven to be launched for a NodeClaim (%s: %v); not deleting it", reason, why),
		DedupeValues:   []string{string(g.UID), reason},
		DedupeTimeout:  remind,
	}
}

func reaped(g *ngv1.NodeGroup, claim string) events.Event {
	return events.Event{
		InvolvedObject: g,
		Type:           corev1.EventTypeNormal,
		Reason:         ReasonReaped,
		Message:        fmt.Sprintf("owner NodeClaim %s is gone", claim),
	}
}

func vanishedBeforeRegistration(claim *karpv1.NodeClaim, group string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         cloudprovider.ReasonVanished,
		Message:        fmt.Sprintf("NodeGroup %s disappeared before its node registered; deleting the NodeClaim so Karpenter relaunches", group),
	}
}
