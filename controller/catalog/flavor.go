package catalog

import "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"

// Flavor is one CKE VM size, as the base catalogue and the overrides file describe it.
type Flavor struct {
	// Name is the flavor as the NodeGroup API spells it: uppercase, e.g. "M".
	Name string `json:"name" jsonschema:"pattern=^[A-Z0-9][A-Z0-9_-]*$"`
	// CPU is the number of vCPUs.
	CPU int64 `json:"cpu" jsonschema:"minimum=1"`
	// MemoryKi is the memory the kernel reports (node capacity), in KiB.
	MemoryKi int64 `json:"memoryKi" jsonschema:"minimum=1"`
	// NominalGB is the memory the flavor is sold with, in GB; prices are computed from it.
	NominalGB int64 `json:"nominalGB" jsonschema:"minimum=1"`
	// PriceHourly is the on-demand price in EUR per hour.
	PriceHourly float64 `json:"priceHourly" jsonschema:"exclusiveMinimum=0"`
	// Source says where the sizing comes from: measured on a live node, or estimated.
	Source string `json:"source,omitempty" jsonschema:"enum=measured,enum=estimate,enum=override"`
}

// QuotaCharge is what one node of the flavor counts against the organisation quota: its vCPUs
// and the memory it is sold with (NominalGB), not the memory its kernel reports.
func (f Flavor) QuotaCharge() quota.Usage { return quota.Usage{CPU: f.CPU, GB: f.NominalGB} }

// Override pins some fields of a flavor. Fields left out keep the base value (or the live
// value when the price refresher runs). A flavor absent from the base catalogue must give
// every field.
type Override struct {
	// Name of the flavor to override or add, uppercase as the NodeGroup API accepts it.
	Name string `json:"name" jsonschema:"pattern=^[A-Z0-9][A-Z0-9_-]*$"`
	// CPU is the number of vCPUs.
	CPU *int64 `json:"cpu,omitempty" jsonschema:"minimum=1"`
	// MemoryKi is the memory the kernel reports, in KiB.
	MemoryKi *int64 `json:"memoryKi,omitempty" jsonschema:"minimum=1"`
	// NominalGB is the memory the flavor is sold with, in GB. Defaults to MemoryKi rounded
	// up to whole GiB for a new flavor.
	NominalGB *int64 `json:"nominalGB,omitempty" jsonschema:"minimum=1"`
	// PriceHourly pins the on-demand price in EUR per hour; it then wins over the refresher.
	PriceHourly *float64 `json:"priceHourly,omitempty" jsonschema:"minimum=0"`
}

// Rates are the per-resource prices every flavor price derives from.
type Rates struct {
	// Currency of the rates, e.g. "EUR".
	Currency string `json:"currency"`
	// VCPUHourly is the price of one vCPU for one hour.
	VCPUHourly float64 `json:"vcpuHourly" jsonschema:"exclusiveMinimum=0"`
	// RAMGBHourly is the price of one nominal GB of memory for one hour.
	RAMGBHourly float64 `json:"ramGBHourly" jsonschema:"exclusiveMinimum=0"`
}

// NodeShape holds the facts that are the same on every flavor (measured on live nodes).
type NodeShape struct {
	// EphemeralStorageKi is the node's ephemeral-storage capacity, in KiB.
	EphemeralStorageKi int64 `json:"ephemeralStorageKi" jsonschema:"minimum=1"`
	// Pods is the kubelet's max pods.
	Pods int64 `json:"pods" jsonschema:"minimum=1"`
	// KubeReservedMemoryKi is the memory the kubelet reserves for system daemons, in KiB.
	KubeReservedMemoryKi int64 `json:"kubeReservedMemoryKi" jsonschema:"minimum=0"`
	// EvictionHardEphemeralStorageKi is the kubelet's hard eviction threshold on ephemeral storage, in KiB.
	EvictionHardEphemeralStorageKi int64 `json:"evictionHardEphemeralStorageKi" jsonschema:"minimum=0"`
}

// Base is the embedded base catalogue: generated from flavors/*.cue by `make generate`.
type Base struct {
	Rates   Rates     `json:"rates"`
	Node    NodeShape `json:"node"`
	Flavors []Flavor  `json:"flavors"`
}
