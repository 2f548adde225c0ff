// Module suites pins Karpenter core's end-to-end suites at the version the provider builds
// on (sigs.k8s.io/karpenter v1.15.0, as in the repository's go.mod), in a module of their own
// so their test-only dependencies (ginkgo, stats, …) stay out of the controller's go.mod.
module github.com/CleverCloud/karpenter-provider-clever-cloud/test/conformance/suites

go 1.26.9

require sigs.k8s.io/karpenter v1.15.0
