//go:build tools

// Package suites pins Karpenter core's own end-to-end suites, which `make conformance` builds
// into test binaries (go test -c) from the module cache and runs against the provider on the
// simulated CKE. Their code stays in the module; nothing of it is copied here.
package suites

import (
	_ "sigs.k8s.io/karpenter/test/suites/disruption"
	_ "sigs.k8s.io/karpenter/test/suites/performance"
	_ "sigs.k8s.io/karpenter/test/suites/regression"
)
