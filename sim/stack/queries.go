package stack

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// NodeClaims lists the NodeClaims of a NodePool ("" for all).
func (e *Env) NodeClaims(ctx context.Context, pool string) ([]karpv1.NodeClaim, error) {
	l := &karpv1.NodeClaimList{}
	var opts []client.ListOption
	if pool != "" {
		opts = append(opts, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	}
	if err := e.Client.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// NodeGroups lists every NodeGroup.
func (e *Env) NodeGroups(ctx context.Context) ([]ngv1.NodeGroup, error) {
	l := &ngv1.NodeGroupList{}
	if err := e.Client.List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PoolNodeGroups lists the NodeGroups launched for a NodePool.
func (e *Env) PoolNodeGroups(ctx context.Context, pool string) ([]ngv1.NodeGroup, error) {
	l := &ngv1.NodeGroupList{}
	if err := e.Client.List(ctx, l, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PoolNodes lists the Nodes of a NodePool (by Karpenter's label).
func (e *Env) PoolNodes(ctx context.Context, pool string) ([]corev1.Node, error) {
	l := &corev1.NodeList{}
	if err := e.Client.List(ctx, l, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Events lists core events with a reason, across namespaces, oldest first.
func (e *Env) Events(ctx context.Context, reason string) ([]corev1.Event, error) {
	l := &corev1.EventList{}
	if err := e.Client.List(ctx, l); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if reason == "" || ev.Reason == reason {
			out = append(out, ev)
		}
	}
	sort.Slice(out, func(i, j int) bool { return EventTime(out[i]).Before(EventTime(out[j])) })
	return out, nil
}

// EventTime is when an event last happened, whichever of its timestamps the recorder set.
func EventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	default:
		return ev.CreationTimestamp.Time
	}
}
