// Command gen writes the bundle's JSON Schemas into schema/. Run it from the repository root:
// `go run ./schema/gen`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema"
)

func main() {
	files, err := schema.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "generating schemas:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join("schema", name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "writing schema:", err)
			os.Exit(1)
		}
	}
}
