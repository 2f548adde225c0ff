package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// teardown plays a delete: Terminating at once; TeardownDelay later the VMs are gone (their
// Nodes turn NotReady, the kubelet having shut down) and the Node objects are deleted; the
// finalizer goes once the Node objects are gone. A Karpenter finalizer on a Node therefore
// keeps the group until Karpenter lets the Node go, which Karpenter does for a NotReady Node
// as soon as the cloud provider reports its instance gone (see sim/README.md, "Deletion").
func (o *Operator) teardown(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, opts Options, now time.Time) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		return reconcile.Result{}, nil
	}
	if st.teardownAt.IsZero() {
		st.teardownAt = now.Add(opts.TeardownDelay)
		log.Info("node group deleted, tearing down", "at", st.teardownAt)
	}
	if err := o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
		setCondition(s, g, ngv1.ConditionTerminating, metav1.ConditionTrue, ReasonDeleting, "")
	}); err != nil {
		return reconcile.Result{}, err
	}
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	// A group that never got a VM (undecided, refused) has nothing to tear down.
	if st.accepted && !st.tornDown {
		if wait := st.teardownAt.Sub(now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if !st.tornDown {
		// The VMs are gone: the quota engine gives the reservation back, or leaks it (a
		// refused group, one deleted before its decision or while its creation ran).
		st.tornDown = true
		o.quota.Delete(g.Name, now)
	}
	// Every Node of the group goes with its VM, including one that was already being deleted
	// (e.g. by Karpenter) and must now show that its kubelet stopped.
	for i := range nodes {
		if err := o.tearDownVM(ctx, log, &nodes[i]); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(nodes) > 0 {
		// The Node watch brings us back when they are gone.
		return reconcile.Result{}, nil
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing finalizer from NodeGroup %q: %w", g.Name, err)
	}
	log.Info("node group gone")
	return reconcile.Result{}, nil
}

// tearDownVM plays a VM's end: the Node turns NotReady, as a kubelet shutting down reports,
// its kubelet stops (no more status nor Lease renewals: a Node still held turns Unknown after
// the node lifecycle controller's grace period) and the operator deletes the Node object.
// It is idempotent, and repairs a Ready condition the fake kubelet wrote in between.
func (o *Operator) tearDownVM(ctx context.Context, log logr.Logger, n *corev1.Node) error {
	// Stopped through the label, which kwok acts on at once (cke.KubeletLabel): it cancels the
	// status post it had scheduled and stops renewing the Lease.
	if n.Labels[cke.KubeletLabel] != cke.KubeletStopped {
		before := n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[cke.KubeletLabel] = cke.KubeletStopped
		if err := o.Patch(ctx, n, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("stopping the kubelet of node %q: %w", n.Name, err))
		}
	}
	if ready := nodeCondition(n, corev1.NodeReady); ready == nil || ready.Status == corev1.ConditionTrue {
		before := n.DeepCopy()
		now := metav1.Now()
		cond := corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: NodeShutdownReason, Message: NodeShutdownMessage,
			LastHeartbeatTime: now, LastTransitionTime: now,
		}
		if ready == nil {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		} else {
			*ready = cond
		}
		if err := o.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("marking node %q NotReady: %w", n.Name, err))
		}
	}
	if n.DeletionTimestamp.IsZero() {
		if err := o.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting node %q: %w", n.Name, err)
		}
		log.Info("VM torn down, node deleted", "node", n.Name)
	}
	return nil
}

// vanish plays the quota edge race seen upstream: the group is deleted with no event.
func (o *Operator) vanish(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, now time.Time) error {
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return err
	}
	for i := range nodes {
		if err := o.tearDownVM(ctx, log, &nodes[i]); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer from vanishing NodeGroup %q: %w", g.Name, err)
	}
	if err := o.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting vanishing NodeGroup %q: %w", g.Name, err)
	}
	st.tornDown = true
	o.quota.Drop(g.Name, now)
	log.Info("node group vanished upstream")
	return nil
}
