package harness

import (
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

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

// GroupCreations counts the NodeGroups created for a pool while the scenario runs, so that a
// scenario can prove that a launch did not go through a create → delete → create cycle.
type GroupCreations struct {
	mu    sync.Mutex
	names map[string]bool
}

// WatchGroupCreations starts counting the NodeGroups created for pool from now on; the watch
// stops when the test ends.
func (s *Scenario) WatchGroupCreations(pool string) *GroupCreations {
	s.T.Helper()
	w, err := s.Env.Client.Watch(s.Ctx, &ngv1.NodeGroupList{}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	s.must(err)
	s.T.Cleanup(w.Stop)
	c := &GroupCreations{names: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			if g, ok := ev.Object.(*ngv1.NodeGroup); ok && ev.Type == watch.Added {
				c.mu.Lock()
				c.names[g.Name] = true
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// Count is how many NodeGroups were created so far.
func (c *GroupCreations) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.names)
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
