package catalog

import (
	"fmt"

	"github.com/go-logr/logr"
)

// Load builds the start-up catalogue: the embedded base plus the overrides file. A bad
// overrides file never stops the controller: it logs the error naming the field, sets the
// overrides_valid metric to 0 and serves the base catalogue, because a typo must not
// crash-loop the autoscaler.
func Load(overridesPath, region string, log logr.Logger) (*Catalog, error) {
	base, err := LoadBase()
	if err != nil {
		return nil, err // a broken embedded catalogue is a build defect, not configuration
	}
	ovs, err := LoadOverrides(overridesPath)
	if err == nil {
		var c *Catalog
		if c, err = New(base, region, ovs, log); err == nil {
			OverridesValid.Set(1)
			return c, nil
		}
	}
	OverridesValid.Set(0)
	log.Error(err, "ignoring the flavors overrides file, serving the base catalogue", "path", overridesPath)
	c, err := New(base, region, nil, log)
	if err != nil {
		return nil, fmt.Errorf("building base catalogue: %w", err)
	}
	return c, nil
}
