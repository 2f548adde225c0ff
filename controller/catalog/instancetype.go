package catalog

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// Constants of every CKE node today.
const (
	Arch = "amd64"
	OS   = "linux"
)

// newInstanceType is the one place a flavor becomes a Karpenter instance type: requirements,
// capacity, overhead and its single on-demand offering.
func newInstanceType(f Flavor, node NodeShape, region string, available bool) *cloudprovider.InstanceType {
	reqs := scheduling.NewRequirements(
		scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, f.Name),
		scheduling.NewRequirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, Arch),
		scheduling.NewRequirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, OS),
		scheduling.NewRequirement(corev1.LabelTopologyRegion, corev1.NodeSelectorOpIn, region),
		scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, region),
		scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		scheduling.NewRequirement(ngv1.LabelFlavor, corev1.NodeSelectorOpIn, f.Name),
		scheduling.NewRequirement(ngv1.LabelClusterNodeRole, corev1.NodeSelectorOpIn, ngv1.NodeRoleWorker),
		scheduling.NewRequirement(v1alpha1.LabelInstanceCPU, corev1.NodeSelectorOpIn, strconv.FormatInt(f.CPU, 10)),
		scheduling.NewRequirement(v1alpha1.LabelInstanceMemory, corev1.NodeSelectorOpIn, strconv.FormatInt(f.NominalGB*1024, 10)),
	)
	return &cloudprovider.InstanceType{
		Name:         f.Name,
		Requirements: reqs,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(f.CPU, resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(f.MemoryKi*1024, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(node.EphemeralStorageKi*1024, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(node.Pods, resource.DecimalSI),
		},
		Overhead: &cloudprovider.InstanceTypeOverhead{
			KubeReserved: corev1.ResourceList{
				corev1.ResourceMemory: *resource.NewQuantity(node.KubeReservedMemoryKi*1024, resource.BinarySI),
			},
			SystemReserved: corev1.ResourceList{},
			EvictionThreshold: corev1.ResourceList{
				corev1.ResourceEphemeralStorage: *resource.NewQuantity(node.EvictionHardEphemeralStorageKi*1024, resource.BinarySI),
			},
		},
		Offerings: cloudprovider.Offerings{{
			Requirements: scheduling.NewRequirements(
				scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
				scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, region),
			),
			Price:     f.PriceHourly,
			Available: available,
		}},
	}
}
