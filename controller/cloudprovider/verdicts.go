package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// OutcomeFlavorUnsupported is the launches_total outcome of a flavor the apiserver refused.
const OutcomeFlavorUnsupported = "FlavorUnsupported"

// launchOutcome is the outcome label of the launch metrics. An accepted launch stays
// "Accepted" whether the operator said Creating (today) or Synced (older clusters): dashboards
// and alerts keep working across the platform's upgrade.
func launchOutcome(o nodegroup.Outcome) string {
	if o == nodegroup.Launched || o == nodegroup.Synced {
		return "Accepted"
	}
	return o.String()
}

// RecordRefusal records a refusal the operator published after Create returned, as Create
// would have recorded it had it seen it: the quota memory, the flavors offered as
// unavailable, the event on the claim and the metrics. It deletes the group (UID
// precondition). The launch follower calls it once it has deleted the launch's NodeClaim. A
// group not shaped for the claim (nodegroup.OwnedBy) was not its launch: nothing is
// recorded, nothing deleted.
func (c *CloudProvider) RecordRefusal(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict) {
	it := c.instanceType(group.Spec.Flavor)
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodegroup", group.Name, "flavor", it.Name))
	if err := nodegroup.OwnedBy(group, claim); err != nil {
		c.recorder.Publish(deleteRefused(claim, group.Name, err))
		log.FromContext(ctx).Info("not recording a refusal on a nodegroup not proven to be this claim's launch", "why", err.Error())
		return
	}
	var err error
	switch verdict.Outcome {
	case nodegroup.QuotaExceeded:
		err = c.quotaRejected(ctx, claim, group, it, verdict.Message)
	case nodegroup.Refused:
		err = c.refused(ctx, claim, group, it, verdict)
	default:
		return
	}
	log.FromContext(ctx).V(1).Info("recorded a refusal published after launch", "refusal", fmt.Sprint(err))
}

// RecordTransient surfaces a transient failure on a launch: an event on the claim, deduped
// with the one Create published for the same state.
func (c *CloudProvider) RecordTransient(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict) {
	c.recorder.Publish(transientFailure(claim, group.Name, verdict.Reason, verdict.Message))
}

// refused handles a refusal the provider cannot classify (an unknown ReconcileFailed reason
// before the operator accepted the group): the group is deleted and its flavor offered as
// unavailable, for longer each time it is refused again (refusedTTL, doubling, up to
// maxRefusedTTL), so Karpenter plans around it instead of cycling create → refuse. Unlike a
// quota refusal, nothing says a larger flavor would fare the same, nor that freeing capacity
// helps.
func (c *CloudProvider) refused(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, it *cloudprovider.InstanceType, verdict nodegroup.Verdict) error {
	refusals.WithLabelValues(it.Name, verdict.Reason).Inc()
	aside := c.rejected.markRefused(it.Name)
	c.recorder.Publish(nodeGroupRefused(claim, group.Name, it.Name, verdict.Reason, verdict.Message, aside))
	log.FromContext(ctx).Info("the node-group operator refused the nodegroup for a reason the provider does not know, deleting it",
		"reason", verdict.Reason, "message", verdict.Message, "flavorSetAsideFor", aside.String())
	c.deleteRefusedGroup(ctx, claim, group)
	return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodegroup %q refused (%s): %s", group.Name, verdict.Reason, verdict.Message))
}

// deleteRefusedGroup deletes a group the platform refused, with Delete's proof: the group is
// shaped for the claim whose launch it was (nodegroup.OwnedBy), and the delete is conditional
// on its UID.
func (c *CloudProvider) deleteRefusedGroup(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup) {
	if err := nodegroup.OwnedBy(group, claim); err != nil {
		c.recorder.Publish(deleteRefused(claim, group.Name, err))
		log.FromContext(ctx).Info("not deleting a refused nodegroup not proven to be this claim's launch", "why", err.Error())
		return
	}
	if err := c.groups.Delete(ctx, group); err != nil && !apierrors.IsNotFound(err) {
		// The garbage collector reaps it later: it is owned by a NodeClaim that is going away.
		log.FromContext(ctx).Error(err, "deleting refused nodegroup")
	}
}

// flavorUnsupported handles the apiserver refusing the flavor (the served CRD's enum, HTTP
// 422): no group exists, and retrying the same flavor fails the same way until Clever Cloud
// changes the cluster's CRD, so it is offered as unavailable for flavorUnsupportedTTL,
// renewed by each refusal, and Karpenter picks another.
func (c *CloudProvider) flavorUnsupported(ctx context.Context, claim *karpv1.NodeClaim, it *cloudprovider.InstanceType, err error) error {
	launches.WithLabelValues(it.Name, OutcomeFlavorUnsupported).Inc()
	c.rejected.markUnsupported(it.Name)
	c.recorder.Publish(flavorUnsupported(claim, it.Name, err))
	log.FromContext(ctx).Info("the NodeGroup API refused the flavor, offering it as unavailable", "error", err.Error())
	return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("flavor %s is not served by the NodeGroup API: %w", it.Name, err))
}

// flavorRefused says whether a create error is the apiserver refusing spec.flavor.
func flavorRefused(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, cause := range d.Causes {
				if cause.Field == "spec.flavor" {
					return true
				}
			}
		}
	}
	return strings.Contains(err.Error(), "spec.flavor")
}
