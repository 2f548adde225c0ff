// Command doclinks fails when a relative link of the project's Markdown (README.md,
// CHANGELOG.md, docs/, examples/) points at a file that is not there or at an #anchor no
// heading of its target has, as GitHub makes anchors. make verify runs it; so does make test,
// through its test.
//
//	go run ./hack/doclinks [ROOT]
package main

import (
	"fmt"
	"os"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	docs, err := Documents(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(1)
	}
	problems, err := Check(root, docs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d broken links in %d documents\n", len(problems), len(docs))
		os.Exit(1)
	}
}
