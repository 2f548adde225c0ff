// Package cloudprovider implements Karpenter's CloudProvider on CKE NodeGroups: one NodeGroup
// with nodeCount 1 per NodeClaim.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/awslabs/operatorpkg/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Name is the provider's name as Karpenter reports it.
const Name = "clevercloud"

// Drift reasons.
const (
	// DriftReasonNodeClass is reported when a node's CleverNodeClass changed after launch.
	DriftReasonNodeClass cloudprovider.DriftReason = "NodeClassDrift"
	// DriftReasonFlavorRetired is reported when a node's flavor is no longer offered (it left
	// the catalogue or the price API stopped listing it), so it is replaced by one that is.
	DriftReasonFlavorRetired cloudprovider.DriftReason = "FlavorRetired"
)

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// CloudProvider launches and tracks CKE nodes as NodeGroups.
type CloudProvider struct {
	kube              client.Client
	groups            *nodegroup.Client
	catalog           *catalog.Catalog
	overlays          *nodeoverlay.InstanceTypeStore
	recorder          events.Recorder
	clock             clock.Clock
	acceptanceTimeout time.Duration
	rejected          *unavailable
	quota             *quota.Tracker
	// look caches what the pending pods ask for and the steering decided from it
	// (offerings.go); its zero value is ready, with cost steering on.
	look pendingLook
}

// New builds the provider. overlays may be nil when NodeOverlay is not wired.
func New(kube client.Client, groups *nodegroup.Client, cat *catalog.Catalog, overlays *nodeoverlay.InstanceTypeStore,
	tracker *quota.Tracker, recorder events.Recorder, clk clock.Clock, acceptanceTimeout time.Duration) *CloudProvider {
	return &CloudProvider{
		kube: kube, groups: groups, catalog: cat, overlays: overlays, recorder: recorder, clock: clk,
		acceptanceTimeout: acceptanceTimeout, rejected: newUnavailable(clk), quota: tracker,
	}
}

// ConditionReasonAwaitingQuotaVerdict is the reason of a claim's Launched=Unknown condition
// while its launch waits behind a quota probe the platform has not judged yet.
const ConditionReasonAwaitingQuotaVerdict = "AwaitingQuotaVerdict"

// admit reserves the launch's size in the quota tracker. Launches within the sure limit are
// admitted together, so a burst runs in parallel without overcommitting the quota; a probe
// beyond it flies alone, and a launch that finds one in flight waits for its verdict (about a
// second) rather than failing, up to the acceptance timeout.
func (c *CloudProvider) admit(ctx context.Context, group, flavor string) error {
	size := c.size(flavor)
	deadline := c.clock.NewTimer(c.acceptanceTimeout)
	defer deadline.Stop()
	for {
		changed := c.quota.Changed()
		a, headroom := c.quota.Try(group, size)
		switch a {
		case quota.Admitted:
			return nil
		case quota.NoRoom:
			return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("flavor %s (%s) does not fit what is known of the organisation quota (sure headroom %s)", flavor, size, quota.FormatHeadroom(headroom)))
		}
		select {
		case <-changed:
		case <-deadline.C():
			// Not insufficient capacity: that would delete the claim, and its replacement would
			// queue behind the same probe. Core keeps a claim whose Create fails otherwise,
			// marks it Launched=Unknown with this reason, and retries with backoff.
			msg := fmt.Sprintf("flavor %s (%s): a quota probe was still awaiting its verdict after %s; retrying", flavor, size, c.acceptanceTimeout)
			return cloudprovider.NewCreateError(errors.New(msg), ConditionReasonAwaitingQuotaVerdict, msg)
		case <-ctx.Done():
			return fmt.Errorf("waiting to launch flavor %s: %w", flavor, ctx.Err())
		}
	}
}

// Name implements cloudprovider.CloudProvider.
func (c *CloudProvider) Name() string { return Name }

// GetSupportedNodeClasses implements cloudprovider.CloudProvider.
func (c *CloudProvider) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&v1alpha1.CleverNodeClass{}}
}

// Reboot implements cloudprovider.CloudProvider: the NodeGroup API cannot reboot a VM.
func (c *CloudProvider) Reboot(context.Context, *karpv1.NodeClaim, string) error {
	return cloudprovider.NewNodeRebootNotImplementedError()
}

// Create implements cloudprovider.CloudProvider.
func (c *CloudProvider) Create(ctx context.Context, claim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	class, err := c.readyNodeClass(ctx, claim)
	if err != nil {
		return nil, err
	}
	it, err := c.pick(ctx, claim)
	if err != nil {
		return nil, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodegroup", claim.Name, "flavor", it.Name))
	if err := c.admit(ctx, claim.Name, it.Name); err != nil {
		return nil, err
	}
	launched := false
	defer func() {
		if !launched {
			c.quota.Release(claim.Name)
		}
	}()
	created := c.clock.Now()
	group, err := c.groups.Create(ctx, nodegroup.Build(claim, class, it.Name))
	if err != nil {
		if flavorRefused(err) {
			return nil, c.flavorUnsupported(ctx, claim, it, err)
		}
		return nil, err
	}
	if group.Spec.Flavor != it.Name {
		// An adopted group from an earlier attempt: describe what was really launched.
		it = c.instanceType(group.Spec.Flavor)
	}
	// Create returns on the operator's decision (its first status write, ~1 s), not on the
	// VM (~40–60 s): while a claim has no provider ID, core's cluster state is unsynced and
	// provisioning and disruption stop cluster-wide. The launch follower
	// (controllers/launch) watches the group until its node registers.
	verdict, last, err := c.groups.Wait(ctx, group.Name, c.acceptanceTimeout)
	if err != nil {
		return nil, fmt.Errorf("waiting for the operator's decision on nodegroup %q: %w", group.Name, err)
	}
	outcome := launchOutcome(verdict.Outcome)
	acceptanceSeconds.WithLabelValues(outcome).Observe(c.clock.Since(created).Seconds())
	launches.WithLabelValues(it.Name, outcome).Inc()
	switch verdict.Outcome {
	case nodegroup.QuotaExceeded:
		return nil, c.quotaRejected(ctx, claim, group, it, verdict.Message)
	case nodegroup.Refused:
		return nil, c.refused(ctx, claim, group, it, verdict)
	case nodegroup.Vanished:
		Vanished.WithLabelValues(StageAcceptance).Inc()
		c.recorder.Publish(nodeGroupVanished(claim, group.Name))
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodegroup %q vanished before it was accepted", group.Name))
	case nodegroup.Launched, nodegroup.Synced:
		c.quota.Accepted(group.Name)
		c.rejected.launched(it.Name)
	case nodegroup.Transient:
		// The operator retries on its own: launched, and said so. Only a group it had
		// accepted proves anything about the quota.
		if verdict.Accepted {
			c.quota.Accepted(group.Name)
		}
		log.FromContext(ctx).Info("the node-group operator reports a transient failure, proceeding; it retries on its own", "reason", verdict.Reason, "message", verdict.Message)
		c.recorder.Publish(transientFailure(claim, group.Name, verdict.Reason, verdict.Message))
	case nodegroup.TimedOut:
		log.FromContext(ctx).Info("no decision from the node-group operator in time, proceeding; the launch follower and Karpenter's registration timeout are the backstops", "timeout", c.acceptanceTimeout)
		c.recorder.Publish(acceptanceTimedOut(claim, group.Name, c.acceptanceTimeout))
	}
	if last != nil {
		group = last
	}
	launched = true
	return c.toNodeClaim(group, it), nil
}

// readyNodeClass resolves the claim's CleverNodeClass and insists it is Ready.
func (c *CloudProvider) readyNodeClass(ctx context.Context, claim *karpv1.NodeClaim) (*v1alpha1.CleverNodeClass, error) {
	name, ok := v1alpha1.NodeClassName(claim)
	if !ok {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("nodeclaim %q does not reference a CleverNodeClass", claim.Name))
	}
	class := &v1alpha1.CleverNodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("resolving CleverNodeClass %q: %w", name, err))
		}
		return nil, fmt.Errorf("resolving CleverNodeClass %q: %w", name, err)
	}
	ready := class.StatusConditions().Get(status.ConditionReady)
	switch {
	case ready.IsFalse():
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("CleverNodeClass %q is not ready: %s", class.Name, ready.Message))
	case !ready.IsTrue():
		// Not reconciled yet: a plain error makes Karpenter retry shortly.
		return nil, fmt.Errorf("CleverNodeClass %q has not been reconciled yet", class.Name)
	}
	return class, nil
}

// pick chooses the cheapest available flavor compatible with the claim's requirements whose
// allocatable fits its requests, honouring NodeOverlay prices and capacities when enabled.
func (c *CloudProvider) pick(ctx context.Context, claim *karpv1.NodeClaim) (*cloudprovider.InstanceType, error) {
	its, blocked, headroom := c.instanceTypes(slices.ContainsFunc(claim.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
		return r.MinValues != nil
	}))
	if c.overlays != nil && options.FromContext(ctx).FeatureGates.NodeOverlay {
		var err error
		if its, err = c.overlays.ApplyAll(claim.Labels[karpv1.NodePoolLabelKey], its); err != nil {
			return nil, fmt.Errorf("applying node overlays: %w", err)
		}
	}
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(claim.Spec.Requirements...)
	var best *cloudprovider.InstanceType
	bestPrice := 0.0
	for _, it := range its {
		if !reqs.IsCompatible(it.Requirements, scheduling.AllowUndefinedWellKnownLabels) {
			continue
		}
		if !resources.Fits(claim.Spec.Resources.Requests, it.Allocatable()) {
			continue
		}
		offering := it.Offerings.Available().Compatible(reqs).Cheapest()
		if offering == nil {
			continue
		}
		if best == nil || offering.Price < bestPrice {
			best, bestPrice = it, offering.Price
		}
	}
	if best == nil {
		msg := "no available flavor satisfies the nodeclaim's requirements and requests"
		if len(blocked) > 0 {
			msg += fmt.Sprintf("; the organisation quota's headroom (%s) rules out %s", quota.FormatHeadroom(headroom), strings.Join(blocked, ", "))
		}
		return nil, cloudprovider.NewInsufficientCapacityError(errors.New(msg))
	}
	return best, nil
}

// instanceType describes a flavor, synthesizing one the catalogue no longer has rather than
// failing: a failing Get or List stalls Karpenter's garbage collection cluster-wide.
func (c *CloudProvider) instanceType(flavor string) *cloudprovider.InstanceType {
	if it, ok := c.catalog.Get(flavor); ok {
		return it
	}
	catalog.UnknownFlavorLookups.WithLabelValues(flavor).Inc()
	return c.catalog.Synthesize(flavor)
}

// Get implements cloudprovider.CloudProvider.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	name := nodegroup.GroupName(providerID)
	if name == "" {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("provider ID %q is not a Clever Cloud one", providerID))
	}
	group, err := c.groups.Get(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodegroup %q: %w", name, err))
		}
		return nil, fmt.Errorf("getting nodegroup %q: %w", name, err)
	}
	if !nodegroup.IsManaged(group) || group.DeletionTimestamp != nil {
		// A terminating group reads as gone: the node-group operator waits for the Node to be
		// deletable, which waits for Karpenter to let go of the claim.
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodegroup %q is terminating or not managed", name))
	}
	return c.toNodeClaim(group, c.instanceType(group.Spec.Flavor)), nil
}

// List implements cloudprovider.CloudProvider: managed, live groups only.
func (c *CloudProvider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	groups, err := c.groups.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for i := range groups {
		g := &groups[i]
		if !nodegroup.IsManaged(g) || g.DeletionTimestamp != nil {
			continue
		}
		out = append(out, c.toNodeClaim(g, c.instanceType(g.Spec.Flavor)))
	}
	return out, nil
}

// Delete implements cloudprovider.CloudProvider.
func (c *CloudProvider) Delete(ctx context.Context, claim *karpv1.NodeClaim) error {
	name := nodegroup.GroupName(claim.Status.ProviderID)
	if name == "" {
		name = claim.Name // launched but never described: the group is named after the claim
	}
	group, err := c.groups.GetUncached(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodegroup %q: %w", name, err))
		}
		return fmt.Errorf("getting nodegroup %q: %w", name, err)
	}
	if group.DeletionTimestamp != nil {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodegroup %q is already terminating", name))
	}
	if err := nodegroup.OwnedBy(group, claim); err != nil {
		// Never delete what this claim does not provably own (a copy of its group under
		// another name names it too); from the claim's point of view its instance is gone.
		c.recorder.Publish(deleteRefused(claim, name, err))
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("refusing to delete nodegroup %q for nodeclaim %q: %w", name, claim.Name, err))
	}
	if err := c.groups.Delete(ctx, group); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return cloudprovider.NewNodeClaimNotFoundError(err)
		}
		return err
	}
	return nil
}

// IsDrifted implements cloudprovider.CloudProvider: a group built from an older version of
// its CleverNodeClass has drifted.
func (c *CloudProvider) IsDrifted(ctx context.Context, claim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	className, ok := v1alpha1.NodeClassName(claim)
	if !ok {
		return "", nil
	}
	class := &v1alpha1.CleverNodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: className}, class); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	name := nodegroup.GroupName(claim.Status.ProviderID)
	if name == "" {
		return "", nil
	}
	group, err := c.groups.Get(ctx, name)
	if err != nil {
		return "", client.IgnoreNotFound(err)
	}
	// Only the catalogue's own availability counts here, never the quota's: a full quota is
	// no reason to replace a node.
	if it, ok := c.catalog.Get(group.Spec.Flavor); !ok || len(it.Offerings.Available()) == 0 {
		return DriftReasonFlavorRetired, nil
	}
	if reason := c.classDrift(claim, group, class); reason != "" {
		return reason, nil
	}
	return c.illShaped(ctx, claim, group.Spec.Flavor)
}

// classDrift says whether the group's CleverNodeClass changed since it was built.
func (c *CloudProvider) classDrift(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, class *v1alpha1.CleverNodeClass) cloudprovider.DriftReason {
	if _, ours := group.Annotations[v1alpha1.AnnotationNodeClassHashVersion]; !ours {
		if _, upstream := group.Annotations[v1alpha1.UpstreamAnnotationNodeClassHash]; upstream {
			return c.upstreamDrift(claim, group, class)
		}
	}
	if group.Annotations[v1alpha1.AnnotationNodeClassHashVersion] != v1alpha1.NodeClassHashVersion {
		return "" // hashed by another scheme: not comparable, and not worth a fleet roll
	}
	if group.Annotations[v1alpha1.AnnotationNodeClassHash] != class.Hash() {
		return DriftReasonNodeClass
	}
	return ""
}

// upstreamDrift judges a group adopted from the upstream provider by upstream's own stamp,
// compared like with like (CleverNodeClass.UpstreamHashMatches): the class changed since the
// group was built exactly when the stamp no longer matches, whatever the hashing schemes.
// Nothing is written to the group: the comparison needs no migration, and a write to a group
// this provider did not build is one more thing that could fail. A stamp of a generation this
// provider cannot reproduce drifts nothing, and says so once.
func (c *CloudProvider) upstreamDrift(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, class *v1alpha1.CleverNodeClass) cloudprovider.DriftReason {
	version := group.Annotations[v1alpha1.UpstreamAnnotationNodeClassHashVersion]
	if legacy := nodegroup.OwnedSpecLabels(group); len(legacy) > 0 {
		// Replacing them would roll the whole fleet at switch-over: they are reported, and go
		// as they are replaced for any other reason (docs/switch-from-upstream.md).
		c.recorder.Publish(legacyLabels(claim, group.Name, legacy))
	}
	match, known := class.UpstreamHashMatches(version, group.Annotations[v1alpha1.UpstreamAnnotationNodeClassHash])
	switch {
	case !known:
		// An event, deduplicated for a day, rather than a log line on every drift check.
		c.recorder.Publish(upstreamHashUnknown(claim, group.Name, version))
		return ""
	case !match:
		return DriftReasonNodeClass
	}
	return ""
}

// toNodeClaim describes a group as Karpenter sees a launched instance.
func (c *CloudProvider) toNodeClaim(g *ngv1.NodeGroup, it *cloudprovider.InstanceType) *karpv1.NodeClaim {
	labels := map[string]string{}
	for key, req := range it.Requirements {
		if req.Len() == 1 {
			labels[key] = req.Values()[0]
		}
	}
	// Only the group's user labels: one built before owned keys were kept out of spec.labels
	// may carry a class's topology.kubernetes.io/zone, which must not override the flavor's.
	for k, v := range nodegroup.NodeLabels(g.Spec.Labels, nil) {
		labels[k] = v
	}
	if pool := g.Labels[karpv1.NodePoolLabelKey]; pool != "" {
		labels[karpv1.NodePoolLabelKey] = pool
	} else if pool := g.Labels[v1alpha1.UpstreamLabelNodePool]; pool != "" {
		labels[karpv1.NodePoolLabelKey] = pool // a group adopted from the upstream provider
	}
	annotations := map[string]string{}
	for _, k := range []string{v1alpha1.AnnotationNodeClassHash, v1alpha1.AnnotationNodeClassHashVersion} {
		if v, ok := g.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:              g.Labels[v1alpha1.LabelNodeClaim],
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: g.CreationTimestamp,
		},
		Status: karpv1.NodeClaimStatus{
			ProviderID:  nodegroup.ProviderID(g.Name),
			Capacity:    it.Capacity,
			Allocatable: it.Allocatable(),
		},
	}
	if g.DeletionTimestamp != nil {
		nc.DeletionTimestamp = g.DeletionTimestamp
	}
	return nc
}
