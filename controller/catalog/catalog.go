// Package catalog turns CKE flavors into Karpenter instance types. The effective catalogue is
// layered, each layer winning over the one before:
//
//  1. the base catalogue embedded from flavors/*.cue;
//  2. live rates and the available-flavor list from the price refresher, when it runs;
//  3. the user's overrides (FLAVORS_CONFIG_PATH), field by field;
//  4. capacity learned from running nodes, for cpu and memory only — what the kernel
//     reports beats any estimate.
//
// Karpenter calls InstanceTypes on every scheduling loop, so the result is built once per
// change and shared; callers must not mutate it.
package catalog

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

// Catalog is the effective, concurrency-safe flavor catalogue.
type Catalog struct {
	region string
	log    logr.Logger

	mu        sync.RWMutex
	base      Base
	overrides []Override
	live      *Rates
	available []string // nil: every flavor is offered
	learned   map[string]Learned
	flavors   []Flavor
	types     []*cloudprovider.InstanceType
	byName    map[string]*cloudprovider.InstanceType
}

// Learned is the capacity observed on a running node of a flavor.
type Learned struct {
	CPU      int64
	MemoryKi int64
}

// New builds a catalogue for a region from a base and validated overrides. Overrides that
// cannot apply (a new flavor missing fields) are an error: the caller decides to fall back.
func New(base Base, region string, overrides []Override, log logr.Logger) (*Catalog, error) {
	c := &Catalog{region: region, base: base, overrides: overrides, learned: map[string]Learned{}, log: log}
	if err := c.rebuild(); err != nil {
		return nil, err
	}
	return c, nil
}

// BaseRates are the embedded base catalogue's rates, which every base price derives from.
func (c *Catalog) BaseRates() Rates { return c.base.Rates }

// SetLive installs rates and the available-flavor list read from the public API. Prices of
// every base flavor are recomputed from the rates; overrides are re-applied on top.
func (c *Catalog) SetLive(rates Rates, available []string) error {
	if !(rates.VCPUHourly > 0) || !(rates.RAMGBHourly > 0) || math.IsInf(rates.VCPUHourly, 0) || math.IsInf(rates.RAMGBHourly, 0) {
		return fmt.Errorf("live rates must be positive: vcpu %v, ram %v", rates.VCPUHourly, rates.RAMGBHourly)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prevRates, prevAvail := c.live, c.available
	c.live = &rates
	if available != nil {
		c.available = slices.Clone(available)
	} else {
		c.available = nil
	}
	if err := c.rebuildLocked(); err != nil {
		c.live, c.available = prevRates, prevAvail
		return err
	}
	for _, name := range available {
		if !slices.ContainsFunc(c.flavors, func(f Flavor) bool { return f.Name == name }) {
			c.log.Info("skipping a flavor the API offers but the catalogue cannot size", "flavor", name)
		}
	}
	return nil
}

// Learn records the capacity a running node of the flavor reports. It returns true when the
// catalogue changed.
func (c *Catalog) Learn(flavor string, l Learned) bool {
	if l.CPU <= 0 || l.MemoryKi <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, seen := c.learned[flavor]
	// Keep the smallest observation: a node that reports less memory must still fit what
	// the scheduler packs onto the flavor.
	if seen && prev.CPU <= l.CPU && prev.MemoryKi <= l.MemoryKi {
		return false
	}
	if seen {
		l = Learned{CPU: min(prev.CPU, l.CPU), MemoryKi: min(prev.MemoryKi, l.MemoryKi)}
	}
	c.learned[flavor] = l
	if err := c.rebuildLocked(); err != nil {
		// Learning only changes positive sizes; a rebuild cannot start failing because of it.
		c.log.Error(err, "rebuilding catalogue after learning capacity", "flavor", flavor)
	}
	capacityLearned.WithLabelValues(flavor).Inc()
	return true
}

// Flavors returns the effective flavors, sorted by price.
func (c *Catalog) Flavors() []Flavor {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.flavors)
}

// InstanceTypes returns the effective instance types. The slice and its elements are shared:
// do not mutate them.
func (c *Catalog) InstanceTypes() []*cloudprovider.InstanceType {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.types
}

// Get returns the instance type of a flavor, if the catalogue has it.
func (c *Catalog) Get(flavor string) (*cloudprovider.InstanceType, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	it, ok := c.byName[flavor]
	return it, ok
}

// Synthesize describes a flavor the catalogue no longer has (a node launched before it left),
// so that Get and List degrade instead of failing. It is sized from what was learned, else
// empty, and carries no available offering.
func (c *Catalog) Synthesize(flavor string) *cloudprovider.InstanceType {
	c.mu.RLock()
	l := c.learned[flavor]
	node := c.base.Node
	c.mu.RUnlock()
	return newInstanceType(Flavor{Name: flavor, CPU: l.CPU, MemoryKi: l.MemoryKi}, node, c.region, false)
}

func (c *Catalog) rebuild() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rebuildLocked()
}

func (c *Catalog) rebuildLocked() error {
	flavors := slices.Clone(c.base.Flavors)
	if c.live != nil {
		for i := range flavors {
			flavors[i].PriceHourly = PriceFor(flavors[i].CPU, flavors[i].NominalGB, *c.live)
		}
	}
	flavors, err := applyOverrides(flavors, c.overrides)
	if err != nil {
		return fmt.Errorf("applying flavor overrides: %w", err)
	}
	for i := range flavors {
		if l, ok := c.learned[flavors[i].Name]; ok {
			flavors[i].CPU, flavors[i].MemoryKi = l.CPU, l.MemoryKi
		}
	}
	slices.SortStableFunc(flavors, func(a, b Flavor) int {
		if a.PriceHourly != b.PriceHourly {
			if a.PriceHourly < b.PriceHourly {
				return -1
			}
			return 1
		}
		return int(a.CPU - b.CPU)
	})
	types := make([]*cloudprovider.InstanceType, 0, len(flavors))
	byName := make(map[string]*cloudprovider.InstanceType, len(flavors))
	for _, f := range flavors {
		// Pinned flavors (overrides) stay offered even when the API's list omits them: the
		// user said they exist.
		available := c.available == nil || slices.Contains(c.available, f.Name) || c.overridden(f.Name)
		it := newInstanceType(f, c.base.Node, c.region, available)
		types = append(types, it)
		byName[f.Name] = it
		flavorPrice.WithLabelValues(f.Name).Set(f.PriceHourly)
	}
	c.flavors, c.types, c.byName = flavors, types, byName
	return nil
}

func (c *Catalog) overridden(name string) bool {
	return slices.ContainsFunc(c.overrides, func(o Override) bool { return o.Name == name })
}

// Flavor returns the effective flavor of that name, if the catalogue has it.
func (c *Catalog) Flavor(name string) (Flavor, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, f := range c.flavors {
		if f.Name == name {
			return f, true
		}
	}
	return Flavor{}, false
}
