// Command celmarker writes the owned-label XValidation marker on CleverNodeClassSpec.Labels
// from controller/labels, the rule's one definition: markers are comments, so controller-gen
// cannot call Go, and a hand-copied rule would drift. `make generate` runs it before
// controller-gen; `make verify` then fails if the marker in the source is stale.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
)

const (
	file = "controller/apis/v1alpha1/clevernodeclass.go"
	// anchor is the line right above the generated marker: a marker controller-gen does not
	// know, so it neither fails nor lands in the CRD's description.
	anchor = "// +hack:celmarker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "celmarker:", err)
		os.Exit(1)
	}
}

func run() error {
	rule, msg := labels.CELRule(), labels.CELMessageExpression()
	if strings.Contains(rule+msg, `"`) {
		return fmt.Errorf("the rule or its message contains a double quote, which a marker cannot carry")
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := bytes.Split(src, []byte("\n"))
	for i, l := range lines {
		trimmed := strings.TrimSpace(string(l))
		if trimmed != anchor {
			continue
		}
		if i+1 >= len(lines) || !strings.Contains(string(lines[i+1]), "+kubebuilder:validation:XValidation:") {
			return fmt.Errorf("%s: the line after %q is not an XValidation marker", file, anchor)
		}
		indent := l[:len(l)-len(bytes.TrimLeft(l, "\t "))]
		marker := fmt.Sprintf("%s// +kubebuilder:validation:XValidation:rule=%q,messageExpression=%q", indent, rule, msg)
		lines[i+1] = []byte(marker)
		out := bytes.Join(lines, []byte("\n"))
		if bytes.Equal(out, src) {
			return nil
		}
		return os.WriteFile(file, out, 0o644)
	}
	return fmt.Errorf("%s: no line %q to write the marker under", file, anchor)
}
