package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// converge makes the Nodes follow the operation: new nodes join at their time, nodes beyond
// the granted count are torn down after TeardownDelay, a node object deleted while its VM
// lives re-registers. It returns the number of live (not terminating) nodes.
func (o *Operator) converge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, flavor cke.Flavor, faults []Fault, opts Options, now time.Time, next *wakeup) (int32, error) {
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return 0, err
	}
	existing := map[int]*corev1.Node{}
	for i := range nodes {
		if idx, ok := nodeIndex(g.Name, nodes[i].Name); ok {
			existing[idx] = &nodes[i]
		}
	}
	op := st.op
	var ws []window
	if op != nil && !op.done {
		ws = op.windows(opts)
		if syncAt := op.at(op.sync, ws); !syncAt.IsZero() && !now.Before(syncAt) {
			op.done = true
			// The group's first reconcile (or a resize begun during it) is over: deleting it
			// now gives its reservation back.
			o.quota.Built(g.Name, now)
		}
	}
	for i := 0; i < int(st.granted); i++ {
		delete(st.removeAt, i)
		if existing[i] != nil {
			delete(st.rejoinAt, i)
			continue
		}
		var at time.Time
		if op != nil && !op.done && int32(i) >= op.from {
			if at = op.at(op.join, ws); at.IsZero() {
				continue // this operation never brings its nodes
			}
		} else {
			// The VM lives but its Node object went: its kubelet registers it again.
			if _, ok := st.rejoinAt[i]; !ok {
				st.rejoinAt[i] = now.Add(opts.JoinDelay)
			}
			at = st.rejoinAt[i]
		}
		if now.Before(at) {
			next.at(at)
			continue
		}
		node := cke.NewNode(cke.NodeSpec{
			Name: ngv1.NodeName(g.Name, i), Flavor: flavor, Role: ngv1.NodeRoleWorker, Group: g.Name,
			Labels: g.Spec.Labels, Taints: toNodeTaints(g.Spec.Taints),
			NeverReady: slices.Contains(faults, FaultNodeNeverReady),
			Topology:   opts.StampTopologyLabels,
		})
		if err := o.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating node %q: %w", node.Name, err)
		}
		log.Info("node joined", "node", node.Name)
		delete(st.rejoinAt, i)
		existing[i] = node
	}
	for idx, n := range existing {
		if idx < int(st.granted) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		at, ok := st.removeAt[idx]
		if !ok {
			at = now.Add(opts.TeardownDelay)
			if op != nil && !op.done && !op.creation {
				at = op.start.Add(opts.TeardownDelay)
			}
			st.removeAt[idx] = at
		}
		if now.Before(at) {
			next.at(at)
			continue
		}
		if err := o.tearDownVM(ctx, log, n); err != nil {
			return 0, err
		}
		delete(existing, idx)
	}
	if op != nil && !op.done {
		wake := []time.Time{op.at(op.fail, ws), op.at(op.sync, ws)}
		for _, w := range ws {
			wake = append(wake, w.from, w.until)
		}
		for _, t := range wake {
			if !t.IsZero() && now.Before(t) {
				next.at(t)
			}
		}
	}
	live := int32(0)
	for idx, n := range existing {
		if idx < int(st.granted) && n.DeletionTimestamp.IsZero() {
			live++
		}
	}
	return live, nil
}

// nodesByGroup indexes the cache's Nodes by their group label. A label selector scans every
// Node in the cache, and a group is reconciled on each of its node's heartbeats: at 600 groups
// that made the operator's work grow with the square of the fleet.
const nodesByGroup = "simcke.nodegroup"

func indexNodesByGroup(o client.Object) []string {
	if g := o.GetLabels()[ngv1.LabelNodeGroup]; g != "" {
		return []string{g}
	}
	return nil
}

func (o *Operator) nodesOf(ctx context.Context, group string) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingFields{nodesByGroup: group}); err != nil {
		return nil, fmt.Errorf("listing nodes of NodeGroup %q: %w", group, err)
	}
	return list.Items, nil
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func toNodeTaints(ts []ngv1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// nodeIndex parses "<group>-node<i>".
func nodeIndex(group, node string) (int, bool) {
	rest, ok := strings.CutPrefix(node, group+"-node")
	if !ok || rest == "" {
		return 0, false
	}
	i := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}
