// Package quotausage keeps the quota tracker's usage current: every NodeGroup (ours, pre-existing
// pools, in flight) and every control-plane node counts against the organisation quota.
package quotausage

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Controller recounts the quota usage whenever a NodeGroup or a control-plane node changes.
type Controller struct {
	kube    client.Client
	catalog *catalog.Catalog
	tracker *quota.Tracker
}

// New builds the controller.
func New(kube client.Client, cat *catalog.Catalog, tracker *quota.Tracker) *Controller {
	return &Controller{kube: kube, catalog: cat, tracker: tracker}
}

// every event maps to one request: the count is cluster-wide.
var recount = handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "organisation-quota"}}}
})

// Register implements operatorpkg's controller.Controller.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.quota").
		Watches(&ngv1.NodeGroup{}, recount).
		Watches(&corev1.Node{}, recount, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[ngv1.LabelClusterNodeRole] == ngv1.NodeRoleControlPlane
		}))).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	o, err := count(ctx, c.kube, c.catalog)
	if err != nil {
		return reconcile.Result{}, err
	}
	c.tracker.Record(o)
	log.FromContext(ctx).V(1).Info("quota usage recounted", "usage", o.Usage.String(), "proven", o.Proven.String(), "groups", len(o.Groups))
	return reconcile.Result{}, nil
}

// count adds up what the organisation quota charges: each NodeGroup's nodes at its flavor's
// size, except groups the quota refused at creation (they hold nothing) and the nodes a
// refused resize asked for (the group holds only those it runs), and each control-plane node.
// The part the platform accepted (accepted groups, the control plane) is the proven use: the
// limit is at least that.
func count(ctx context.Context, kube client.Client, cat *catalog.Catalog) (quota.Observation, error) {
	groups := &ngv1.NodeGroupList{}
	if err := kube.List(ctx, groups, client.UnsafeDisableDeepCopy); err != nil {
		return quota.Observation{}, fmt.Errorf("listing nodegroups: %w", err)
	}
	o := quota.Observation{Groups: make(map[string]quota.Group, len(groups.Items))}
	for i := range groups.Items {
		g := &groups.Items[i]
		st, nodes := state(g)
		gr := quota.Group{State: st, Deleting: g.DeletionTimestamp != nil}
		if f, ok := cat.Flavor(g.Spec.Flavor); ok {
			gr.Size = f.QuotaCharge().Times(nodes)
		}
		// A flavor we cannot size charges nothing we can count; the refusal memory covers it.
		o.Groups[g.Name] = gr
		if gr.State == quota.GroupUncharged {
			continue
		}
		o.Usage = o.Usage.Add(gr.Size)
		if gr.State == quota.GroupCreating || gr.State == quota.GroupBuilt {
			o.Proven = o.Proven.Add(gr.Size)
		}
	}
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes, client.MatchingLabels{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}, client.UnsafeDisableDeepCopy); err != nil {
		return quota.Observation{}, fmt.Errorf("listing control-plane nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		var u quota.Usage
		if f, ok := cat.Flavor(n.Labels[ngv1.LabelFlavor]); ok {
			u = f.QuotaCharge()
		} else {
			// No flavor label: charge what the node reports, memory in nominal (decimal) GB.
			u = quota.Usage{
				CPU: n.Status.Capacity.Cpu().Value(),
				GB:  int64(math.Round(float64(n.Status.Capacity.Memory().Value()) / 1e9)),
			}
		}
		o.Usage = o.Usage.Add(u)
		o.Proven = o.Proven.Add(u) // the control plane runs: the quota holds it
	}
	return o, nil
}

// state reads what a group's status says of its charge, and how many nodes it charges. It
// reads the status as if the group were not being deleted: a refused group keeps its refusal
// while the operator tears it down (it charges nothing), and an accepted one keeps its charge
// until it is gone.
//
// A quota refusal on a group that runs nodes (built, or a node counted) is a refused resize:
// the engine granted, and still holds, the nodes it runs, not the ones spec.nodeCount asks
// for; counting nothing would make the headroom promise a running node's worth of quota that
// is not there. A group refused at creation never got a node, so it charges nothing.
func state(g *ngv1.NodeGroup) (quota.GroupState, int64) {
	live := *g // shallow: only the deletion timestamp differs
	live.DeletionTimestamp = nil
	v := nodegroup.Judge(&live)
	switch {
	case v.Outcome == nodegroup.QuotaExceeded:
		if running := running(g, v); running > 0 {
			return quota.GroupBuilt, running
		}
		return quota.GroupUncharged, int64(g.Spec.NodeCount)
	case v.Synced:
		return quota.GroupBuilt, int64(g.Spec.NodeCount)
	case v.Accepted:
		return quota.GroupCreating, int64(g.Spec.NodeCount)
	}
	return quota.GroupCharged, int64(g.Spec.NodeCount)
}

// running is how many nodes a group refused a resize still runs, as far as the quota engine
// is concerned: the nodes the operator counts and, once the group was built (Synced or
// Ready), at least the count it last synced (targetNodeCount), and at least one, the node it
// was built with, when its status counts none.
func running(g *ngv1.NodeGroup, v nodegroup.Verdict) int64 {
	n := int64(g.Status.NodeCount)
	if v.Synced {
		n = max(n, int64(g.Status.TargetNodeCount), 1)
	}
	return n
}
