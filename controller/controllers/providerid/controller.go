// Package providerid stamps provider IDs on CKE nodes. CKE leaves spec.providerID empty, and
// Karpenter matches a Node to its NodeClaim by provider ID, so without this no node ever
// registers.
package providerid

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// ReasonNotStamped is the event reason when a node of a managed group cannot get an ID.
const ReasonNotStamped = "ProviderIDNotStamped"

// Controller stamps clevercloud://<group> on <group>-node0 of a managed one-node group.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
}

// New builds the controller.
func New(kube client.Client, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, recorder: recorder}
}

// Register implements operatorpkg's controller.Controller.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.providerid").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*corev1.Node).Spec.ProviderID == "" && o.GetLabels()[ngv1.LabelNodeGroup] != ""
		}))).
		// A node may join before its group is readable in the cache; retry when the group moves.
		Watches(&ngv1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: ngv1.NodeName(o.GetName(), 0)}}}
		})).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	groupName := node.Labels[ngv1.LabelNodeGroup]
	if node.Spec.ProviderID != "" || groupName == "" {
		return reconcile.Result{}, nil
	}
	group := &ngv1.NodeGroup{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: groupName}, group); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // not ours, or gone; the group watch brings us back
		}
		return reconcile.Result{}, fmt.Errorf("getting nodegroup %q: %w", groupName, err)
	}
	if !nodegroup.IsManaged(group) {
		return reconcile.Result{}, nil
	}
	// One provider ID names one node: only node0 of a group that asks for exactly one node
	// gets it. A group resized by hand keeps its extra nodes unmanaged, and says so.
	if group.Spec.NodeCount != 1 || node.Name != ngv1.NodeName(group.Name, 0) {
		c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonNotStamped,
			"NodeGroup %s asks for %d nodes; only %s of a one-node group gets a provider ID", group.Name, group.Spec.NodeCount, ngv1.NodeName(group.Name, 0))
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.ProviderID = nodegroup.ProviderID(group.Name)
	if err := c.kube.Patch(ctx, node, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("stamping provider ID on node %q: %w", node.Name, err)
	}
	log.FromContext(ctx).Info("stamped provider ID", "node", node.Name, "providerID", node.Spec.ProviderID)
	return reconcile.Result{}, nil
}
