package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
)

// Compat is what the project is built and tested with, read from its go.mod files.
type Compat struct {
	// Core is sigs.k8s.io/karpenter, the controller's Karpenter core.
	Core string
	// ClientGo is k8s.io/client-go, the controller's Kubernetes client.
	ClientGo string
	// Kubernetes is k8s.io/kubernetes in sim/tools/kube/go.mod: the control plane every test,
	// the conformance run and the bench run on.
	Kubernetes string
	// Kwok and Etcd are the simulated nodes' kubelet and the simulated control plane's store.
	Kwok, Etcd string
}

// Minor is a version's major.minor without the v: v1.37.2 is 1.37.
func Minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// Compatibility reads the versions under root.
func Compatibility(root string) (Compat, error) {
	var c Compat
	var err error
	if c.Core, err = dep("sigs.k8s.io/karpenter"); err != nil {
		return c, err
	}
	if c.ClientGo, err = dep("k8s.io/client-go"); err != nil {
		return c, err
	}
	for _, r := range []struct {
		dir, module string
		into        *string
	}{
		{"kube", "k8s.io/kubernetes", &c.Kubernetes},
		{"kwok", "sigs.k8s.io/kwok", &c.Kwok},
		{"etcd", "go.etcd.io/etcd/server/v3", &c.Etcd},
	} {
		if *r.into, err = required(filepath.Join(root, "sim", "tools", r.dir, "go.mod"), r.module); err != nil {
			return c, err
		}
	}
	return c, nil
}

// dep is the version of a module this program is built with, which is the controller's: both
// are in the one go.mod.
func dep(path string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build information")
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version, nil
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not a dependency", path)
}

// required is the version a go.mod requires of a module.
func required(gomod, module string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`)
	m := re.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s does not require %s", gomod, module)
	}
	return string(m[1]), nil
}

// CompatibilityPage is docs/reference/compatibility.md.
func CompatibilityPage(root string) ([]byte, error) {
	c, err := Compatibility(root)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(generatedHeader("Compatibility", "go run ./hack/docgen"))
	b.WriteString("What this checkout is built with and tested against. Every test, the Karpenter core\n")
	b.WriteString("conformance run (`make conformance`) and the benchmark (`make bench`) run on the simulated\n")
	b.WriteString("CKE, whose control plane is built from the pinned Kubernetes module below; no other\n")
	b.WriteString("Kubernetes version is tested.\n\n")
	b.WriteString("| component | version | pinned in |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| provider | this checkout (`karpenter-clevercloud --version` prints a release's version; see CHANGELOG.md) | |\n")
	fmt.Fprintf(&b, "| Karpenter core (`sigs.k8s.io/karpenter`) | %s | `go.mod` |\n", c.Core)
	fmt.Fprintf(&b, "| Kubernetes of the simulated CKE (kube-apiserver, scheduler, controller-manager, kubectl) | %s | `sim/tools/kube/go.mod` |\n", c.Kubernetes)
	fmt.Fprintf(&b, "| Kubernetes client of the controller (`k8s.io/client-go`) | %s (Kubernetes %s) | `go.mod` |\n", c.ClientGo, "1."+strings.TrimPrefix(Minor(c.ClientGo), "0."))
	fmt.Fprintf(&b, "| kwok (the simulated nodes' kubelet) | %s | `sim/tools/kwok/go.mod` |\n", c.Kwok)
	fmt.Fprintf(&b, "| etcd of the simulated CKE | %s | `sim/tools/etcd/go.mod` |\n", c.Etcd)
	b.WriteString("| CKE's NodeGroup API | `api.clever-cloud.com/v1`, as the simulated CKE serves it (`sim/`) | |\n")
	fmt.Fprintf(&b, "\nSupported: Kubernetes %s, the version CKE runs. A cluster on another minor version may\n", Minor(c.Kubernetes))
	b.WriteString("work but is not tested; `karpenter-clevercloud preflight` says which version the cluster runs.\n")
	return b.Bytes(), nil
}
