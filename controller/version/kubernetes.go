package version

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TestedKubernetes are the Kubernetes minor versions this release is tested on: the simulated
// CKE's pinned control plane (sim/tools/kube) and kubelets (sim/cke.KubeletVersion) run them,
// and every test that starts a cluster runs on them. It is the one list the preflight, the
// docs' compatibility table and the tests that pin the simulator read; a test fails when the
// simulator's pin leaves it.
var TestedKubernetes = []string{"1.37"}

// KubernetesMinor returns "MAJOR.MINOR" of a Kubernetes version as the apiserver or a kubelet
// reports it ("v1.37.2", "v1.37.0-clevercloud.1", "1.37+"), or an error for anything else.
func KubernetesMinor(v string) (string, error) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("kubernetes version %q has no minor", v)
	}
	// Providers append suffixes to the minor ("37+" on some managed clusters).
	minor := strings.TrimRight(parts[1], "+")
	if _, err := strconv.Atoi(parts[0]); err != nil {
		return "", fmt.Errorf("kubernetes version %q: major: %w", v, err)
	}
	if _, err := strconv.Atoi(minor); err != nil {
		return "", fmt.Errorf("kubernetes version %q: minor: %w", v, err)
	}
	return parts[0] + "." + minor, nil
}

// KubernetesTested says whether a reported version's minor is in TestedKubernetes.
func KubernetesTested(v string) (bool, error) {
	m, err := KubernetesMinor(v)
	if err != nil {
		return false, err
	}
	return slices.Contains(TestedKubernetes, m), nil
}
