package providerid

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// ReasonNotStamped is the event reason when a node of a group labelled as ours gets no ID:
// the group is not proven to be owned by a live NodeClaim, or does not have exactly one node.
// Part of the product's interface: do not rename.
const ReasonNotStamped = "ProviderIDNotStamped"

// The refusals are not deduplicated: the stamper looks again only when the node or its group
// changes, and each look is a decision the node's owner may be waiting for.

func notOwned(node *corev1.Node, group string, why error) events.Event {
	return events.Event{
		InvolvedObject: node,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonNotStamped,
		Message:        fmt.Sprintf("NodeGroup %s carries the provider's labels but is not proven to be launched by Karpenter (%v); not stamping a provider ID", group, why),
	}
}

func notOneNode(node *corev1.Node, group *ngv1.NodeGroup) events.Event {
	return events.Event{
		InvolvedObject: node,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonNotStamped,
		Message: fmt.Sprintf("NodeGroup %s asks for %d nodes; only %s of a one-node group gets a provider ID",
			group.Name, group.Spec.NodeCount, ngv1.NodeName(group.Name, 0)),
	}
}
