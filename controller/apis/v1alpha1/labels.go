package v1alpha1

import (
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Group is the API group of the provider's own resources and the prefix of its labels.
const Group = "karpenter.clever-cloud.com"

// Labels and annotations the provider writes on NodeGroups and exposes on instance types.
const (
	// LabelNodeClaim names the NodeClaim a NodeGroup was launched for. Its presence makes a
	// NodeGroup "managed" for reads; destructive paths also require the claim's UID
	// (AnnotationNodeClaimUID) to match a live NodeClaim.
	LabelNodeClaim = Group + "/nodeclaim"
	// LabelNodeClass names the CleverNodeClass a NodeGroup was built from.
	LabelNodeClass = Group + "/nodeclass"
	// LabelInstanceCPU is the flavor's vCPU count, as an integer (e.g. "8").
	LabelInstanceCPU = Group + "/instance-cpu"
	// LabelInstanceMemory is the flavor's nominal memory in MiB, as an integer (e.g. "12288").
	LabelInstanceMemory = Group + "/instance-memory"

	// AnnotationNodeClaimUID is the UID of the NodeClaim a NodeGroup was launched for: the
	// ownership proof. It is deliberately not an owner reference: Kubernetes' garbage
	// collector deletes every dependent of an object deleted with foreground propagation before
	// the object's own finalizers run, which would tear the VM down before Karpenter drained
	// the node.
	AnnotationNodeClaimUID = Group + "/nodeclaim-uid"

	// AnnotationNodeClassHash is the hash of the CleverNodeClass spec a NodeGroup was built from.
	AnnotationNodeClassHash = Group + "/nodeclass-hash"
	// AnnotationNodeClassHashVersion versions the hashing scheme, so that changing it never
	// reads as drift on every node at once.
	AnnotationNodeClassHashVersion = Group + "/nodeclass-hash-version"
	// NodeClassHashVersion is the current hashing scheme.
	NodeClassHashVersion = "v1"

	// ProviderIDPrefix starts every provider ID: clevercloud://<nodegroup>.
	ProviderIDPrefix = "clevercloud://"

	// TerminationFinalizer holds a CleverNodeClass while NodeClaims still reference it.
	TerminationFinalizer = Group + "/termination"
)

func init() {
	// Karpenter only provisions for pods that select on labels it knows instance types can
	// carry; register ours so `nodeSelector: {clever-cloud.com/flavor: M}` triggers a launch.
	karpv1.WellKnownLabels.Insert(ngv1.LabelFlavor, ngv1.LabelClusterNodeRole, LabelInstanceCPU, LabelInstanceMemory)
}
