// Package preflight checks a CKE cluster for what this provider needs, reading it only: the
// NodeGroup API and the flavors its CRD accepts, the Kubernetes version, signs of CKE's own
// autoscaler, another Karpenter or the upstream provider, where the controller would run, and
// the organisation quota in use. The same checks back three things: the `preflight` command
// (one line per check and an exit code), the `values` command (a values file derived from
// what the cluster says), and the running controller, which repeats those that can change at
// run time and reports them as the karpenter_clevercloud_preflight_check gauge and in its log.
package preflight

import (
	"fmt"
	"io"
	"strings"
)

// Result is a check's outcome.
type Result string

const (
	// Pass: nothing to do.
	Pass Result = "pass"
	// Warn: the provider works, but something deserves a look (Action says what).
	Warn Result = "warn"
	// Fail: the provider would not work, or would fight something else; fix it first.
	Fail Result = "fail"
)

// Results lists every Result, for the gauge's series.
var Results = []Result{Pass, Warn, Fail}

// Check names, stable: they label the gauge and docs/preflight.md documents each one.
const (
	CheckNodeGroupAPI      = "nodegroup-api"
	CheckFlavors           = "flavors"
	CheckKubernetesVersion = "kubernetes-version"
	CheckCKEAutoscaler     = "cke-autoscaler"
	CheckOtherKarpenter    = "other-karpenter"
	CheckPlacement         = "placement"
	CheckQuota             = "quota"
)

// Check is one check's outcome.
type Check struct {
	Name   string
	Result Result
	// Found is what the cluster showed, one sentence.
	Found string
	// Action is what to do about it; empty when there is nothing to do.
	Action string
}

// Report is every check run, in order.
type Report []Check

// Exit codes of the preflight command, for scripts.
const (
	// ExitOK: every check passed.
	ExitOK = 0
	// ExitFail: at least one check failed, or the cluster could not be read at all.
	ExitFail = 1
	// ExitWarn: no check failed, at least one warned.
	ExitWarn = 2
)

// ExitCode is the command's exit code for the report: ExitFail over ExitWarn over ExitOK.
func (r Report) ExitCode() int {
	code := ExitOK
	for _, c := range r {
		switch c.Result {
		case Fail:
			return ExitFail
		case Warn:
			code = ExitWarn
		}
	}
	return code
}

// Get returns the check named name, if the report has it.
func (r Report) Get(name string) (Check, bool) {
	for _, c := range r {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Write prints one line per check — `PASS name: found` then, indented on the next line, what
// to do — and a summary line.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	counts := map[Result]int{}
	for _, c := range r {
		counts[c.Result]++
		fmt.Fprintf(&b, "%-4s %-18s %s\n", strings.ToUpper(string(c.Result)), c.Name, c.Found)
		if c.Action != "" {
			fmt.Fprintf(&b, "     %-18s → %s\n", "", c.Action)
		}
	}
	fmt.Fprintf(&b, "%d passed, %d warned, %d failed (exit %d)\n", counts[Pass], counts[Warn], counts[Fail], r.ExitCode())
	_, err := io.WriteString(w, b.String())
	return err
}
