package harness

import (
	"os"
	"path/filepath"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// PoolGroups lists the NodeGroups launched for a NodePool, terminating ones included.
func (s *Scenario) PoolGroups(pool string) []ngv1.NodeGroup {
	s.T.Helper()
	groups, err := s.Env.PoolNodeGroups(s.Ctx, pool)
	s.must(err)
	return groups
}

// PoolFlavors returns the flavors of the NodePool's NodeGroups that are not terminating.
func (s *Scenario) PoolFlavors(pool string) []string {
	s.T.Helper()
	var out []string
	for _, g := range s.PoolGroups(pool) {
		if g.DeletionTimestamp == nil {
			out = append(out, g.Spec.Flavor)
		}
	}
	return out
}

// UnservedFlavor is a flavor the catalogue's overrides can add but the served NodeGroup CRD's
// enum does not list, so the apiserver refuses its groups (HTTP 422 on spec.flavor).
const UnservedFlavor = "2XL"

// RestartWithUnservedFlavor restarts the controller with an overrides file that adds
// UnservedFlavor, half a 2XS: cheaper at any rates the price API gives, so Karpenter tries it
// first. It allows the error lines its refusals make Karpenter log, and puts the suite's
// controller back when the test ends, before the scenario's cleanup.
func (s *Scenario) RestartWithUnservedFlavor() {
	s.T.Helper()
	s.AllowErrors(`failed launching nodeclaim.*(` + UnservedFlavor + `|Unsupported value)`)
	path := filepath.Join(s.T.TempDir(), "flavors.yaml")
	s.must(os.WriteFile(path, []byte("- name: "+UnservedFlavor+"\n  cpu: 2\n  memoryKi: 1857672\n  nominalGB: 2\n  priceHourly: 0.0167\n"), 0o600))
	s.RestartController(map[string]string{"FLAVORS_CONFIG_PATH": path})
	s.T.Cleanup(func() { s.RestartController(nil) })
}

// FlavorsOf lists the flavors of groups, in their order, terminating ones included.
func FlavorsOf(groups []ngv1.NodeGroup) []string {
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, g.Spec.Flavor)
	}
	return out
}
