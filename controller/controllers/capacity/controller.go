// Package capacity learns flavor sizes from the nodes that run them. The catalogue's memory
// figures for some flavors are estimates; what a running node's kernel reports is the truth,
// and Karpenter packs pods by it.
package capacity

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
)

// Controller feeds the catalogue with the capacity of Karpenter-managed nodes.
type Controller struct {
	kube    client.Client
	catalog *catalog.Catalog
}

// New builds the controller.
func New(kube client.Client, cat *catalog.Catalog) *Controller {
	return &Controller{kube: kube, catalog: cat}
}

// Register implements operatorpkg's controller.Controller.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.capacity").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			l := o.GetLabels()
			return l[karpv1.NodePoolLabelKey] != "" && l[ngv1.LabelFlavor] != ""
		}))).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	flavor := node.Labels[ngv1.LabelFlavor]
	cpu, mem := node.Status.Capacity.Cpu(), node.Status.Capacity.Memory()
	if flavor == "" || cpu.IsZero() || mem.IsZero() {
		return reconcile.Result{}, nil
	}
	l := catalog.Learned{CPU: cpu.Value(), MemoryKi: mem.Value() / 1024}
	if c.catalog.Learn(flavor, l) {
		log.FromContext(ctx).Info("learned flavor capacity from a running node", "flavor", flavor, "node", node.Name, "cpu", l.CPU, "memoryKi", l.MemoryKi)
	}
	return reconcile.Result{}, nil
}
