package catalog

import (
	"errors"
	"fmt"
	"math"
	"os"

	"sigs.k8s.io/yaml"
)

// LoadOverrides reads and validates the overrides file (FLAVORS_CONFIG_PATH). An empty path
// means no overrides.
func LoadOverrides(path string) ([]Override, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading flavors overrides %q: %w", path, err)
	}
	ovs, err := ParseOverrides(data)
	if err != nil {
		return nil, fmt.Errorf("flavors overrides %q: %w", path, err)
	}
	return ovs, nil
}

// ParseOverrides decodes a YAML (or JSON) list of overrides, strictly: an unknown field is a
// typo that would otherwise be silently ignored.
func ParseOverrides(data []byte) ([]Override, error) {
	var ovs []Override
	if err := yaml.UnmarshalStrict(data, &ovs); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	var errs []error
	seen := map[string]int{}
	for i, o := range ovs {
		if o.Name == "" {
			errs = append(errs, fmt.Errorf("[%d].name: required", i))
			continue
		}
		if !validName(o.Name) {
			errs = append(errs, fmt.Errorf("[%d].name: %q is not an uppercase flavor name as the NodeGroup API accepts it", i, o.Name))
		}
		if j, dup := seen[o.Name]; dup {
			errs = append(errs, fmt.Errorf("[%d].name: %q duplicates [%d]", i, o.Name, j))
		}
		seen[o.Name] = i
		errs = append(errs, positive(i, o.Name, "cpu", o.CPU), positive(i, o.Name, "memoryKi", o.MemoryKi), positive(i, o.Name, "nominalGB", o.NominalGB))
		if o.PriceHourly != nil && (*o.PriceHourly < 0 || math.IsNaN(*o.PriceHourly) || math.IsInf(*o.PriceHourly, 0)) {
			errs = append(errs, fmt.Errorf("[%d] %s.priceHourly: must not be negative, got %v", i, o.Name, *o.PriceHourly))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ovs, nil
}

func positive(i int, name, field string, v *int64) error {
	if v != nil && *v <= 0 {
		return fmt.Errorf("[%d] %s.%s: must be positive, got %d", i, name, field, *v)
	}
	return nil
}

// applyOverrides overlays the overrides field by field. A flavor the list does not know must
// give cpu, memoryKi and priceHourly; its nominalGB defaults to its memory in whole GiB.
func applyOverrides(flavors []Flavor, ovs []Override) ([]Flavor, error) {
	out := append([]Flavor(nil), flavors...)
	index := map[string]int{}
	for i, f := range out {
		index[f.Name] = i
	}
	var errs []error
	for _, o := range ovs {
		i, known := index[o.Name]
		if !known {
			if o.CPU == nil || o.MemoryKi == nil || o.PriceHourly == nil {
				errs = append(errs, fmt.Errorf("%s: a flavor absent from the base catalogue must give cpu, memoryKi and priceHourly", o.Name))
				continue
			}
			nominal := (*o.MemoryKi + 1<<20 - 1) >> 20
			if o.NominalGB != nil {
				nominal = *o.NominalGB
			}
			out = append(out, Flavor{Name: o.Name, CPU: *o.CPU, MemoryKi: *o.MemoryKi, NominalGB: nominal, PriceHourly: *o.PriceHourly, Source: "override"})
			index[o.Name] = len(out) - 1
			continue
		}
		f := &out[i]
		if o.CPU != nil {
			f.CPU = *o.CPU
		}
		if o.MemoryKi != nil {
			f.MemoryKi = *o.MemoryKi
		}
		if o.NominalGB != nil {
			f.NominalGB = *o.NominalGB
		}
		if o.PriceHourly != nil {
			f.PriceHourly = *o.PriceHourly
		}
	}
	return out, errors.Join(errs...)
}
