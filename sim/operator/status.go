package operator

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Status values the simulator writes beside the ones of the ngv1 package.
const (
	// ReasonDeleting is the Terminating reason.
	ReasonDeleting = "Deleting"
	// ReasonProvisioningFailed is the ReconcileFailed reason (and the phase) of FaultLateRefusal.
	ReasonProvisioningFailed = "ProvisioningFailed"
	// ReasonNetworkUnavailable is the default Options.UnknownFailureReason: a reason the
	// platform has never been seen writing, so no provider can know it.
	ReasonNetworkUnavailable = "NetworkUnavailable"
	// UpstreamErrorMessage is the message of ReconcileFailed reason UpstreamError, as seen live.
	UpstreamErrorMessage = "API error: RequestDidntReturnSuccess"
	// LateRefusalMessage is the ReconcileFailed message of FaultLateRefusal (%s: the flavor).
	LateRefusalMessage = "Failed to provision the node group's VMs: no %s capacity available"
	// NodeShutdownReason and NodeShutdownMessage are what a Node's Ready condition says once
	// its VM is torn down: the kubelet's own words when the machine shuts down.
	NodeShutdownReason  = "KubeletNotReady"
	NodeShutdownMessage = "node is shutting down"
)

// status writes what the operator has decided so far into s.
func (o *Operator) status(s *ngv1.NodeGroupStatus, g *ngv1.NodeGroup, st *groupState, live int32, opts Options, now time.Time) {
	if st.refused {
		// The refusal is the whole write: no Creating, no ReconcileInProgress before it. A
		// refused resize of a running group keeps what the group already showed.
		s.Phase = st.refusalReason
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, st.refusalReason, st.refusalMessage)
		if st.accepted {
			s.NodeCount = live
		}
		return
	}
	if !st.accepted {
		return // not decided yet: no write
	}
	s.UpstreamID = upstreamID(g)
	s.NodeCount = live
	op := st.op
	if op == nil || op.done {
		s.Phase = ngv1.PhaseSynced
		s.TargetNodeCount = st.granted
		s.Labels, s.Taints = g.Spec.Labels, g.Spec.Taints
		setCondition(s, g, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced, "")
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		return
	}
	s.TargetNodeCount = st.granted
	if op.creation {
		s.Phase = ngv1.PhaseCreating
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating, "")
	} else {
		s.Phase = ngv1.PhaseScaling
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonScaling, "")
	}
	ws := op.windows(opts)
	failAt := op.at(op.fail, ws)
	switch {
	case !failAt.IsZero() && !now.Before(failAt) && op.failInPlace:
		// The operator gave up without saying so: still Creating, no longer in progress.
		reason := opts.UnknownFailureReason
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, reason, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, reason, "")
	case !failAt.IsZero() && !now.Before(failAt):
		s.Phase = ReasonProvisioningFailed
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ReasonProvisioningFailed, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ReasonProvisioningFailed, fmt.Sprintf(LateRefusalMessage, g.Spec.Flavor))
	case failing(ws, now):
		s.Phase = ngv1.PhaseUpstreamError
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, UpstreamErrorMessage)
	default:
		if c := meta.FindStatusCondition(s.Conditions, ngv1.ConditionReconcileFailed); c != nil && c.Status == metav1.ConditionTrue {
			// Recovered from an upstream error.
			setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		}
	}
}

func upstreamID(g *ngv1.NodeGroup) string { return "nodegroup_" + string(g.UID) }

func (o *Operator) patchStatus(ctx context.Context, g *ngv1.NodeGroup, mutate func(*ngv1.NodeGroupStatus)) error {
	before := g.DeepCopy()
	mutate(&g.Status)
	if equality.Semantic.DeepEqual(before.Status, g.Status) {
		return nil
	}
	if err := o.Status().Patch(ctx, g, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status of NodeGroup %q: %w", g.Name, err)
	}
	return nil
}

func setCondition(s *ngv1.NodeGroupStatus, g *ngv1.NodeGroup, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: g.Generation,
	})
}
