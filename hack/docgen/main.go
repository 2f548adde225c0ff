// Command docgen writes the reference pages under docs/reference from the code itself: every
// setting of the controller (controller/settings, with the defaults the bundle renders into
// out/) and every Karpenter core flag and environment variable the binary honours
// (sigs.k8s.io/karpenter's options, read from its flag set), and every metric the provider
// registers (controller/metrics.Collectors, read through a Prometheus registry), the
// versions the project is built and tested with (its go.mod files), and the binary's commands
// and their flags (controller/cli, the table its help comes from). `make
// generate` runs it after the bundle is rendered; `make verify` fails when a page is stale.
// Run it from the repository root: `go run ./hack/docgen`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir is where the pages go, relative to the repository root.
const Dir = "docs/reference"

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

// run writes every page under root's docs/reference.
func run(root string) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, Dir), 0o755); err != nil {
		return err
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(root, Dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Pages renders every reference page, by file name.
func Pages(root string) (map[string][]byte, error) {
	settings, err := SettingsPage(root)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	metrics, err := MetricsPage()
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	compat, err := CompatibilityPage(root)
	if err != nil {
		return nil, fmt.Errorf("compatibility: %w", err)
	}
	return map[string][]byte{"settings.md": settings, "metrics.md": metrics, "compatibility.md": compat, "cli.md": CLIPage()}, nil
}
