// Package cke holds the facts of Clever Kubernetes Engine that the simulator reproduces:
// the flavor table and the shape of the Node objects CKE registers.
package cke

import (
	"fmt"
	"sort"
)

// Flavor is one CKE VM size as the platform provisions it.
type Flavor struct {
	Name string
	// CPU is the number of vCPUs.
	CPU int64
	// MemoryKi is the memory the kernel reports, hence the node's memory capacity.
	MemoryKi int64
	// NominalGB is the memory the flavor is sold with; the quota engine counts this.
	NominalGB int64
}

// CKE's default organisation quota, control-plane nodes included, until support raises it.
const (
	DefaultQuotaCPU   = 40
	DefaultQuotaRAMGB = 40
)

// Facts that are the same on every flavor (measured on live nodes).
const (
	EphemeralStorageKi             = 40971488
	MaxPods                        = 110
	KubeReservedMemoryKi           = 100 * 1024
	EvictionHardEphemeralStorageKi = 4097149
)

// The simulator keeps its own copy of the table rather than importing the controller's
// catalogue: the simulator plays the platform, and the platform does not read the provider's
// data. A test asserts both agree.
var flavors = map[string]Flavor{
	"2XS": {Name: "2XS", CPU: 4, MemoryKi: 3715344, NominalGB: 4},
	"XS":  {Name: "XS", CPU: 6, MemoryKi: 7553664, NominalGB: 8},
	"S":   {Name: "S", CPU: 8, MemoryKi: 11385832, NominalGB: 12},
	"M":   {Name: "M", CPU: 10, MemoryKi: 15229256, NominalGB: 16},
	"L":   {Name: "L", CPU: 12, MemoryKi: 22896304, NominalGB: 24},
	"XL":  {Name: "XL", CPU: 16, MemoryKi: 30584176, NominalGB: 32},
}

// LookupFlavor returns the flavor of that name.
func LookupFlavor(name string) (Flavor, bool) {
	f, ok := flavors[name]
	return f, ok
}

// MustFlavor returns the flavor of that name or panics; for names that come from code.
func MustFlavor(name string) Flavor {
	f, ok := flavors[name]
	if !ok {
		panic(fmt.Sprintf("unknown CKE flavor %q", name))
	}
	return f
}

// Flavors returns every flavor, smallest first.
func Flavors() []Flavor {
	out := make([]Flavor, 0, len(flavors))
	for _, f := range flavors {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out
}
