package harness

import (
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// SuiteOption shapes the stack a suite starts (RunSuite).
type SuiteOption func(*stack.Options)

// WorkerOnly starts the suite's simulated CKE in the worker-only topology some CKE clusters
// show: no control-plane Node, and a pre-existing worker NodeGroup pool of nodes × flavor that
// Karpenter does not manage (the 2026-10-01 live run had a 2 × S one).
func WorkerOnly(pool, flavor string, nodes int32) SuiteOption {
	return func(o *stack.Options) {
		so := stack.SuiteSimOptions()
		if o.Sim != nil {
			so = *o.Sim
		}
		so.ControlPlaneNodes = 0
		so.WorkerPool = &sim.WorkerPool{Name: pool, Flavor: flavor, Nodes: nodes}
		o.Sim = &so
	}
}
