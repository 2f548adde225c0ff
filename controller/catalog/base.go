package catalog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// baseJSON is generated from flavors/*.cue by `make generate`; never edit it by hand.
//
//go:embed base.json
var baseJSON []byte

// BaseJSON returns the embedded base catalogue document as generated from flavors/.
func BaseJSON() []byte { return baseJSON }

// LoadBase decodes and validates the embedded base catalogue.
func LoadBase() (Base, error) {
	var b Base
	if err := json.Unmarshal(baseJSON, &b); err != nil {
		return Base{}, fmt.Errorf("decoding embedded base catalogue: %w", err)
	}
	if err := b.Validate(); err != nil {
		return Base{}, fmt.Errorf("embedded base catalogue: %w", err)
	}
	return b, nil
}

// Validate checks every field a launch decision depends on.
func (b Base) Validate() error {
	var errs []error
	if b.Rates.VCPUHourly <= 0 || b.Rates.RAMGBHourly <= 0 {
		errs = append(errs, errors.New("rates: vcpuHourly and ramGBHourly must be positive"))
	}
	if b.Node.EphemeralStorageKi <= 0 || b.Node.Pods <= 0 || b.Node.KubeReservedMemoryKi < 0 || b.Node.EvictionHardEphemeralStorageKi < 0 {
		errs = append(errs, errors.New("node: ephemeralStorageKi and pods must be positive, reservations not negative"))
	}
	if len(b.Flavors) == 0 {
		errs = append(errs, errors.New("flavors: empty"))
	}
	seen := map[string]bool{}
	for i, f := range b.Flavors {
		if seen[f.Name] {
			errs = append(errs, fmt.Errorf("flavors[%d].name: duplicate %q", i, f.Name))
		}
		seen[f.Name] = true
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("flavors[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Validate checks that a flavor can be offered: named, sized and priced.
func (f Flavor) Validate() error {
	var errs []error
	if !validName(f.Name) {
		errs = append(errs, fmt.Errorf("name: %q is not an uppercase flavor name", f.Name))
	}
	if f.CPU <= 0 {
		errs = append(errs, fmt.Errorf("%s.cpu: must be positive, got %d", f.Name, f.CPU))
	}
	if f.MemoryKi <= 0 {
		errs = append(errs, fmt.Errorf("%s.memoryKi: must be positive, got %d", f.Name, f.MemoryKi))
	}
	if f.NominalGB <= 0 {
		errs = append(errs, fmt.Errorf("%s.nominalGB: must be positive, got %d", f.Name, f.NominalGB))
	}
	if !(f.PriceHourly > 0) || math.IsInf(f.PriceHourly, 0) {
		errs = append(errs, fmt.Errorf("%s.priceHourly: must be positive, got %v", f.Name, f.PriceHourly))
	}
	return errors.Join(errs...)
}

// PriceFor is the platform's price formula: vCPU × vCPU rate + nominal GB × RAM rate,
// rounded to 4 decimals as Clever Cloud publishes it.
func PriceFor(cpu, nominalGB int64, r Rates) float64 {
	return math.Round((float64(cpu)*r.VCPUHourly+float64(nominalGB)*r.RAMGBHourly)*1e4) / 1e4
}

func validName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i, c := range name {
		switch {
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}
