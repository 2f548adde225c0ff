package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/quotaengine"
)

// controlPlaneHolder is the quota engine's name for the control plane's use: not a valid
// NodeGroup name, so it cannot collide with one.
const controlPlaneHolder = "control plane"

// Reconcile moves one NodeGroup along its timeline.
func (o *Operator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := o.log.WithValues("nodegroup", req.Name)
	opts := o.Options()
	g := &ngv1.NodeGroup{}
	if err := o.Get(ctx, req.NamespacedName, g); err != nil {
		if apierrors.IsNotFound(err) {
			o.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading NodeGroup %q: %w", req.Name, err)
	}
	now := time.Now()
	st := o.state(g, now, opts)
	if !g.DeletionTimestamp.IsZero() {
		return o.teardown(ctx, log, g, st, opts, now)
	}
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		// A metadata update, not a status write: the first status write is the decision.
		controllerutil.AddFinalizer(g, Finalizer)
		if err := o.Update(ctx, g); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer to NodeGroup %q: %w", g.Name, err)
		}
	}
	flavor, ok := cke.LookupFlavor(g.Spec.Flavor)
	if !ok {
		// The served CRD's enum makes this unreachable; a hand-edited CRD must not crash the
		// operator, which leaves such a group alone.
		log.Error(nil, "NodeGroup with a flavor outside the catalogue left alone", "flavor", g.Spec.Flavor)
		return reconcile.Result{}, nil
	}
	faults := faultsOf(g, opts.Faults)
	if slices.Contains(faults, FaultNeverAccept) && !st.accepted && !st.refused {
		return reconcile.Result{}, nil
	}

	var next wakeup
	if st.judgedGeneration != g.Generation {
		if st.changeSeenGen != g.Generation {
			st.changeSeen, st.changeSeenGen = now, g.Generation
			if st.judgedGeneration == 0 {
				st.changeSeen = st.born
			}
		}
		if !st.accepted && st.enlistedGeneration != g.Generation && !slices.Contains(faults, FaultUnknownRefusal) {
			// The engine takes the creation (into a batch) when it is made, not when its
			// verdict is written.
			if err := o.holdControlPlane(ctx, now); err != nil {
				return reconcile.Result{}, err
			}
			o.quota.Create(g.Name, demand(flavor, g.Spec.NodeCount), st.changeSeen)
			st.enlistedGeneration = g.Generation
		}
		if at := st.changeSeen.Add(opts.DecisionDelay); now.Before(at) {
			next.at(at)
		} else if wait, err := o.judge(ctx, log, g, st, flavor, faults, opts, now); err != nil {
			return reconcile.Result{}, err
		} else if wait > 0 {
			next.at(now.Add(wait))
		}
	}
	if st.accepted && slices.Contains(faults, FaultVanishAfterAccept) {
		if at := st.decidedAt.Add(opts.VanishDelay); now.Before(at) {
			next.at(at)
		} else {
			return reconcile.Result{}, o.vanish(ctx, log, g, st, now)
		}
	}
	live := int32(0)
	if st.accepted {
		var err error
		if live, err = o.converge(ctx, log, g, st, flavor, faults, opts, now, &next); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) { o.status(s, g, st, live, opts, now) }); err != nil {
		return reconcile.Result{}, err
	}
	return next.result(now), nil
}

// judge asks the quota engine about the spec's nodeCount (a creation's verdict, or a resize)
// and starts the operation it grants. It returns a wait while the verdict is not given yet.
func (o *Operator) judge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, flavor cke.Flavor, faults []Fault, opts Options, now time.Time) (time.Duration, error) {
	want := demand(flavor, g.Spec.NodeCount)
	var accepted bool
	message, reason := "", ngv1.ReasonQuotaExceeded
	switch {
	case !st.accepted && slices.Contains(faults, FaultUnknownRefusal):
		reason = opts.UnknownFailureReason
	case !st.accepted:
		d, decided := o.quota.Decide(g.Name, now)
		if !decided {
			if d.At.IsZero() {
				// The engine has lost the creation (only a bug would do it): enlisting it
				// again beats waiting forever for a verdict.
				o.quota.Create(g.Name, want, now)
				st.enlistedGeneration = g.Generation
				return max(opts.DecisionDelay, time.Millisecond), nil
			}
			return max(d.At.Sub(now), time.Millisecond), nil
		}
		accepted, message = d.Accepted, d.Message
	default:
		if err := o.holdControlPlane(ctx, now); err != nil {
			return 0, err
		}
		accepted, message = o.quota.Resize(g.Name, want, now)
	}

	st.judgedGeneration = g.Generation
	if !accepted {
		st.refused, st.refusalReason, st.refusalMessage = true, reason, message
		log.Info("refused", "reason", reason, "nodeCount", g.Spec.NodeCount, "message", message)
		return 0, nil
	}
	st.refused, st.refusalReason, st.refusalMessage = false, "", ""
	op := &operation{creation: !st.accepted, start: st.changeSeen, from: st.granted}
	if !st.accepted {
		st.accepted, st.decidedAt = true, now
		op.from = 0
	}
	if g.Spec.NodeCount == st.granted && !op.creation {
		// Nothing upstream to do (e.g. a labels-only change).
		return 0, nil
	}
	st.granted = g.Spec.NodeCount
	o.plan(op, st, faults, opts, now)
	st.op = op
	log.Info("accepted", "nodeCount", g.Spec.NodeCount, "creation", op.creation, "join", op.join, "sync", op.sync)
	return 0, nil
}

// demand is what n nodes of a flavor take of the quota.
func demand(f cke.Flavor, n int32) quotaengine.Usage {
	return quotaengine.Usage{CPU: f.CPU, GB: f.NominalGB}.Times(int64(n))
}

// holdControlPlane tells the quota engine what the control plane uses: its Nodes carry a
// flavor label and no group label. It reads the cache.
func (o *Operator) holdControlPlane(ctx context.Context, now time.Time) error {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingLabels{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}); err != nil {
		return fmt.Errorf("listing control-plane nodes: %w", err)
	}
	var u quotaengine.Usage
	for _, n := range list.Items {
		if f, ok := cke.LookupFlavor(n.Labels[ngv1.LabelFlavor]); ok && n.Labels[ngv1.LabelNodeGroup] == "" {
			u = u.Add(demand(f, 1))
		}
	}
	o.quota.Hold(controlPlaneHolder, u, now)
	return nil
}
