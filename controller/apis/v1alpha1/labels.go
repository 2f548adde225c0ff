package v1alpha1

// Group is the API group of the provider's own resources and the prefix of its labels.
const Group = "karpenter.clever-cloud.com"

// Labels and annotations the provider writes on NodeGroups and exposes on instance types.
const (
	// LabelNodeClass names the CleverNodeClass a NodeGroup was built from.
	LabelNodeClass = Group + "/nodeclass"
	// LabelInstanceCPU is the flavor's vCPU count, as an integer (e.g. "8").
	LabelInstanceCPU = Group + "/instance-cpu"
	// LabelInstanceMemory is the flavor's nominal memory in MiB, as an integer (e.g. "12288").
	LabelInstanceMemory = Group + "/instance-memory"

	// AnnotationNodeClassHash is the hash of the CleverNodeClass spec a NodeGroup was built from.
	AnnotationNodeClassHash = Group + "/nodeclass-hash"
	// AnnotationNodeClassHashVersion versions the hashing scheme, so that changing it never
	// reads as drift on every node at once.
	AnnotationNodeClassHashVersion = Group + "/nodeclass-hash-version"
	// NodeClassHashVersion is the current hashing scheme.
	NodeClassHashVersion = "v1"

	// TerminationFinalizer holds a CleverNodeClass while NodeClaims still reference it.
	TerminationFinalizer = Group + "/termination"
)
