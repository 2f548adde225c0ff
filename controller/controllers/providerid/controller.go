// Package providerid stamps provider IDs on CKE nodes. CKE leaves spec.providerID empty, and
// Karpenter matches a Node to its NodeClaim by provider ID, so without this no node ever
// registers.
//
// A provider ID makes Karpenter adopt a node, so it is stamped only with the same ownership
// proof the destructive paths require (nodegroup.ConfirmOwner: the UID of a NodeClaim
// that an uncached read finds alive), and only on the one node of a one-node group: a
// hand-copied group that kept our labels, or the extra nodes of a group resized out of band,
// are left alone.
package providerid

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/internal/finished"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Workers is how many nodes are stamped at once.
const Workers = 16

// Controller stamps clevercloud://<group> on <group>-node0 of a one-node group owned by a
// live NodeClaim.
type Controller struct {
	kube     client.Client
	api      client.Reader
	recorder events.Recorder

	// stamped holds the nodes this process stamped: a cache that has not seen the stamp yet
	// while the group's status moves would otherwise re-read the proof and stamp again. A
	// provider ID cannot change once set, so a stamped node never needs another look.
	stamped finished.Set
}

// New builds the controller. api must be an uncached reader: ownership is confirmed with it.
func New(kube client.Client, api client.Reader, recorder events.Recorder) *Controller {
	return &Controller{kube: kube, api: api, recorder: recorder}
}

// needsID says the node may need a provider ID: it has none and is in a NodeGroup.
func needsID(o client.Object) bool {
	return o.(*corev1.Node).Spec.ProviderID == "" && o.GetLabels()[ngv1.LabelNodeGroup] != ""
}

// Register implements operatorpkg's controller.Controller.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.providerid").
		For(&corev1.Node{}, builder.WithPredicates(c.stamped.Predicate(needsID, false))).
		// A node may join before its group is readable in the cache; retry when the group moves.
		Watches(&ngv1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: ngv1.NodeName(o.GetName(), 0)}}}
		})).
		// Each node is stamped on its own after two uncached reads and a patch: one worker
		// registered a 600-node scale-out at a few nodes a second, pods waiting on Ready nodes
		// (core's performance suite). Nodes are independent, so they are stamped side by side.
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	groupName := node.Labels[ngv1.LabelNodeGroup]
	if !needsID(node) || c.stamped.Has(node.UID) {
		return reconcile.Result{}, nil
	}
	// The cache filters out nodes of groups that are not even labelled as ours (the platform's
	// own pools) without an API call; what looks managed is then re-read uncached.
	cached := &ngv1.NodeGroup{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: groupName}, cached); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // not ours, or gone; the group watch brings us back
		}
		return reconcile.Result{}, fmt.Errorf("getting nodegroup %q: %w", groupName, err)
	}
	if !nodegroup.IsManaged(cached) {
		return reconcile.Result{}, nil
	}
	group := &ngv1.NodeGroup{}
	if err := c.api.Get(ctx, client.ObjectKey{Name: groupName}, group); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("reading nodegroup %q uncached: %w", groupName, err))
	}
	if _, err := nodegroup.ConfirmOwner(ctx, c.api, group); err != nil {
		if !errors.Is(err, nodegroup.ErrNotOwned) {
			return reconcile.Result{}, err
		}
		// A hand-copied group keeps our labels: stamping its node would make Karpenter count
		// a node no NodeClaim launched. Garbage collection reports the group itself.
		c.recorder.Publish(notOwned(node, group.Name, err))
		log.FromContext(ctx).Info("not stamping a provider ID: nodegroup not owned by a live NodeClaim", "node", node.Name, "nodegroup", group.Name, "reason", err.Error())
		return reconcile.Result{}, nil
	}
	// One provider ID names one node: only node0 of a group that asks for exactly one node
	// gets it. A group resized by hand keeps its extra nodes unmanaged, and says so.
	if group.Spec.NodeCount != 1 || node.Name != ngv1.NodeName(group.Name, 0) {
		c.recorder.Publish(notOneNode(node, group))
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.ProviderID = nodegroup.ProviderID(group.Name)
	if err := c.kube.Patch(ctx, node, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("stamping provider ID on node %q: %w", node.Name, err)
	}
	c.stamped.Add(node.UID)
	log.FromContext(ctx).Info("stamped provider ID", "node", node.Name, "providerID", node.Spec.ProviderID)
	return reconcile.Result{}, nil
}
