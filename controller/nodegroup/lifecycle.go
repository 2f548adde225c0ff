package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// ErrNotOurs means a NodeGroup of that name exists but was not launched for this NodeClaim.
var ErrNotOurs = errors.New("a NodeGroup of that name exists and is not owned by this NodeClaim")

// Client creates, watches and deletes NodeGroups. Reads that decide something destructive go
// through the uncached API reader.
type Client struct {
	kube    client.Client
	api     client.Reader
	watcher client.WithWatch
}

// NewClient wires a cached client (reads and writes), an uncached reader and a watch client.
func NewClient(kube client.Client, api client.Reader, watcher client.WithWatch) *Client {
	return &Client{kube: kube, api: api, watcher: watcher}
}

// Create creates the group, or adopts an existing group of the same name that the same
// NodeClaim (by UID) owns: a retried Create must not launch twice nor fail on its own group.
func (c *Client) Create(ctx context.Context, g *ngv1.NodeGroup) (*ngv1.NodeGroup, error) {
	err := c.kube.Create(ctx, g)
	if err == nil {
		return g, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating nodegroup %q: %w", g.Name, err)
	}
	existing := &ngv1.NodeGroup{}
	if err := c.api.Get(ctx, client.ObjectKey{Name: g.Name}, existing); err != nil {
		return nil, fmt.Errorf("reading existing nodegroup %q: %w", g.Name, err)
	}
	want, got := OwnerClaim(g), OwnerClaim(existing)
	if want == nil || got == nil || want.UID != got.UID || want.Name != got.Name {
		return nil, fmt.Errorf("creating nodegroup %q: %w", g.Name, ErrNotOurs)
	}
	return existing, nil
}

// MigrateOwner moves a group's ownership from an owner reference to a NodeClaim (written by
// the upstream provider and by this provider's earlier versions) to the claim UID annotation
// that Build writes, keeping the same claim: the owner reference would let Kubernetes' garbage
// collector delete the group, and so the VM, the moment the claim is deleted with foreground
// propagation, before Karpenter drains the node.
//
// It writes only once the ownership proof holds for the group as the apiserver holds it now,
// as every other write to a group does: ClaimOf on the listed group; an uncached re-read that
// finds the same object (UID), not terminating, naming the same claim, with an owner reference
// to that very claim (name and UID); and ConfirmOwner's uncached read that finds that claim
// alive with that UID. A hand-made copy can carry the labels, the annotations and the owner
// reference, but not its claim's name while the original exists, so it is never written to,
// owner reference included: what Kubernetes does with a copy's owner reference is its maker's
// business. The patch is conditional on the re-read resourceVersion, so a group changed after
// the proof is not written.
//
// It reports whether it changed the group. A group with no owner reference to a NodeClaim, or
// that went, was replaced or is terminating since it was listed, is left alone with no error; a
// group the proof refuses, with a NotOwnedError (ErrNotOwned) saying why; a failed read or
// patch, with another error.
func MigrateOwner(ctx context.Context, kube client.Writer, api client.Reader, listed *ngv1.NodeGroup) (bool, error) {
	if LegacyOwnerReference(listed) == nil {
		return false, nil
	}
	owner, err := ClaimOf(listed)
	if err != nil {
		return false, err
	}
	fresh := &ngv1.NodeGroup{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(listed), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("re-reading nodegroup %q before moving its ownership: %w", listed.Name, err)
	}
	ref := LegacyOwnerReference(fresh)
	if fresh.UID != listed.UID || fresh.DeletionTimestamp != nil || ref == nil {
		return false, nil // replaced, going, or migrated meanwhile: the next pass judges it again
	}
	now, err := ClaimOf(fresh)
	if err != nil {
		return false, err
	}
	if *now != *owner || ref.Name != owner.Name || ref.UID != owner.UID {
		return false, notOwned(ReasonNotThisClaim, "owner reference to NodeClaim %q (UID %s) does not name the group's claim %q (UID %s)", ref.Name, ref.UID, now.Name, now.UID)
	}
	if _, err := ConfirmOwner(ctx, api, fresh); err != nil {
		return false, err
	}
	updated := fresh.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[v1alpha1.AnnotationNodeClaimUID] = string(owner.UID)
	updated.OwnerReferences = slices.DeleteFunc(updated.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.UID == ref.UID && r.Kind == ref.Kind && r.APIVersion == ref.APIVersion
	})
	if err := kube.Patch(ctx, updated, client.MergeFromWithOptions(fresh, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("moving nodegroup %q's ownership from an owner reference to annotation %s: %w", fresh.Name, v1alpha1.AnnotationNodeClaimUID, err)
	}
	return true, nil
}

// Wait returns the operator's decision on a group, driven by watch events: Launched
// (Creating) or Synced, a refusal, a transient failure, or Vanished; it gives up with TimedOut
// after timeout. The decision is the operator's first status write, about 1 s after creation
// on today's platform, so Wait does not wait for the VM. The last seen state of the group is
// returned with the verdict.
func (c *Client) Wait(ctx context.Context, name string, timeout time.Duration) (Verdict, *ngv1.NodeGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *ngv1.NodeGroup
	// accepted remembers, across events and re-opened watches, that the operator accepted
	// the group: an unknown failure after that is transient, not a refusal.
	accepted := false
	for {
		// A watch without a resourceVersion first replays the current object as ADDED, so
		// a decision that landed before the watch started is not missed.
		w, err := c.watcher.Watch(ctx, &ngv1.NodeGroupList{}, client.MatchingFieldsSelector{
			Selector: fields.OneTermEqualSelector("metadata.name", name),
		})
		if err != nil {
			if ctx.Err() != nil {
				return Verdict{Outcome: TimedOut, Accepted: accepted}, last, nil
			}
			return Verdict{}, last, fmt.Errorf("watching nodegroup %q: %w", name, err)
		}
		v, seen, done := c.consume(ctx, w, &accepted)
		w.Stop()
		if seen != nil {
			last = seen
		}
		if done {
			return v, last, nil
		}
		if ctx.Err() != nil {
			return Verdict{Outcome: TimedOut, Accepted: accepted}, last, nil
		}
		// The server closed the watch (timeout, restart): confirm the group still exists
		// before watching again, since a deletion may have happened in between.
		if err := c.api.Get(ctx, client.ObjectKey{Name: name}, &ngv1.NodeGroup{}); apierrors.IsNotFound(err) {
			return Verdict{Outcome: Vanished, Message: "the NodeGroup was deleted"}, last, nil
		}
	}
}

func (c *Client) consume(ctx context.Context, w watch.Interface, accepted *bool) (Verdict, *ngv1.NodeGroup, bool) {
	var last *ngv1.NodeGroup
	for {
		select {
		case <-ctx.Done():
			return Verdict{}, last, false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return Verdict{}, last, false
			}
			g, isGroup := ev.Object.(*ngv1.NodeGroup)
			if !isGroup {
				continue // a watch error status; reopen
			}
			last = g
			if ev.Type == watch.Deleted {
				return Verdict{Outcome: Vanished, Message: "the NodeGroup was deleted"}, last, true
			}
			v := JudgeAfter(g, *accepted)
			*accepted = v.Accepted
			if v.Outcome.Decided() {
				return v, last, true
			}
		}
	}
}

// Get reads a group through the cache.
func (c *Client) Get(ctx context.Context, name string) (*ngv1.NodeGroup, error) {
	g := &ngv1.NodeGroup{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, g); err != nil {
		return nil, err
	}
	return g, nil
}

// GetUncached reads a group from the apiserver, for decisions that must not act on a stale cache.
func (c *Client) GetUncached(ctx context.Context, name string) (*ngv1.NodeGroup, error) {
	g := &ngv1.NodeGroup{}
	if err := c.api.Get(ctx, client.ObjectKey{Name: name}, g); err != nil {
		return nil, err
	}
	return g, nil
}

// List lists every NodeGroup through the cache.
func (c *Client) List(ctx context.Context) ([]ngv1.NodeGroup, error) {
	list := &ngv1.NodeGroupList{}
	if err := c.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodegroups: %w", err)
	}
	return list.Items, nil
}

// Delete deletes the group if it is still the same object (UID precondition), so a group
// re-created under the same name is never deleted by mistake.
func (c *Client) Delete(ctx context.Context, g *ngv1.NodeGroup) error {
	if err := c.kube.Delete(ctx, g, client.Preconditions{UID: &g.UID}); err != nil {
		return fmt.Errorf("deleting nodegroup %q: %w", g.Name, err)
	}
	return nil
}
