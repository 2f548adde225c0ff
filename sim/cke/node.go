package cke

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Region and Zone are CKE's only location, Paris.
const (
	Region = "par"
	Zone   = "par"
)

// What simulated kubelets report: current CKE clusters run Kubernetes 1.37.0 on kernel
// 7.2.8-clevercloud-vm with containerd 2.3.5.
const (
	KubeletVersion          = "v1.37.0"
	KernelVersion           = "7.2.8-clevercloud-vm"
	ContainerRuntimeVersion = "containerd://2.3.5"
)

// KwokAnnotation marks the Nodes the fake kubelet (kwok) drives; nodes without it never
// become Ready, which is how the simulator fakes a VM that boots but never joins properly.
const (
	KwokAnnotation = "kwok.x-k8s.io/node"
	KwokManaged    = "fake"
)

// KubeletLabel set to KubeletStopped on a Node makes its kubelet stop reporting, as the
// kubelet of a dead VM or of a node cut off by a network partition: kwok no longer renews the
// node's Lease nor posts its status, and the node lifecycle controller marks it Unknown after
// its grace period. Taking the label off brings the kubelet back.
//
// A label, not an annotation: kwok selects its nodes by annotation on its own side and drops
// the events of a node that stops matching, so it would keep driving it; a label selector is
// the apiserver's, whose watch turns a node leaving the selection into a deletion, on which
// kwok cancels the node's pending status updates and stops renewing its Lease.
const (
	KubeletLabel   = "sim.clever-cloud.com/kubelet"
	KubeletStopped = "stopped"
)

// NodeSpec describes a Node the way CKE registers it.
type NodeSpec struct {
	Name   string
	Flavor Flavor
	// Role is ngv1.NodeRoleWorker or ngv1.NodeRoleControlPlane.
	Role string
	// Group is the NodeGroup the node belongs to; empty for control-plane nodes.
	Group  string
	Labels map[string]string
	Taints []corev1.Taint
	// NeverReady leaves the node out of the fake kubelet's hands.
	NeverReady bool
	// Topology stamps topology.kubernetes.io/region and /zone. CKE does not (on a
	// live node they came from Karpenter's registration); the option exists for clusters
	// that still show them.
	Topology bool
}

// NewNode builds the Node object CKE's kubelet would register: CKE labels, well-known labels,
// the group's labels (on every node of the group), the flavor's capacity and allocatable, and
// deliberately no spec.providerID.
func NewNode(s NodeSpec) *corev1.Node {
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range map[string]string{
		ngv1.LabelFlavor:               s.Flavor.Name,
		ngv1.LabelClusterNodeRole:      s.Role,
		corev1.LabelArchStable:         "amd64",
		corev1.LabelOSStable:           "linux",
		corev1.LabelHostname:           s.Name,
		corev1.LabelInstanceTypeStable: s.Flavor.Name,
	} {
		labels[k] = v
	}
	if s.Topology {
		labels[corev1.LabelTopologyRegion] = Region
		labels[corev1.LabelTopologyZone] = Zone
	}
	if s.Group != "" {
		labels[ngv1.LabelNodeGroup] = s.Group
	}
	annotations := map[string]string{}
	if !s.NeverReady {
		annotations[KwokAnnotation] = KwokManaged
	}
	capacity, allocatable := Resources(s.Flavor)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: s.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:            "amd64",
				OperatingSystem:         "linux",
				KubeletVersion:          KubeletVersion,
				KernelVersion:           KernelVersion,
				ContainerRuntimeVersion: ContainerRuntimeVersion,
				OSImage:                 "Clever Cloud CKE (simulated)",
			},
		},
	}
}

// Resources returns a flavor's node capacity and allocatable: the kubelet reserves 100Mi of
// memory and holds back the hard eviction threshold of ephemeral storage; no CPU is reserved.
func Resources(f Flavor) (capacity, allocatable corev1.ResourceList) {
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(f.CPU, resource.DecimalSI),
		corev1.ResourceMemory:           kibi(f.MemoryKi),
		corev1.ResourceEphemeralStorage: kibi(EphemeralStorageKi),
		corev1.ResourcePods:             *resource.NewQuantity(MaxPods, resource.DecimalSI),
	}
	allocatable = capacity.DeepCopy()
	allocatable[corev1.ResourceMemory] = kibi(f.MemoryKi - KubeReservedMemoryKi)
	allocatable[corev1.ResourceEphemeralStorage] = kibi(EphemeralStorageKi - EvictionHardEphemeralStorageKi)
	return capacity, allocatable
}

// kibi keeps the Ki suffix so quantities read like a kubelet's ("11385832Ki").
func kibi(n int64) resource.Quantity {
	return resource.MustParse(strconv.FormatInt(n, 10) + "Ki")
}
