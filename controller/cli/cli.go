// Package cli is the binary's command line. One table of commands gives the dispatch, the
// strict flag parsing, the help, the shell completion and the reference page
// (docs/reference/cli.md), so that none of them can name a command or a flag the others do not
// know; the provider's settings in the help come from controller/settings' own definitions,
// Karpenter core's flags from core's own flag set.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/inspect"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

// Name is the binary's name, as the help and the completion scripts spell it.
const Name = "karpenter-clevercloud"

const (
	// ExitOK: the command did what was asked; also help's code.
	ExitOK = 0
	// ExitUsage: the command line was refused (an unknown command, flag or argument, a bad flag
	// value), the same code as the controller's invalid settings. preflight keeps its own 1:
	// its 2 means "warnings only".
	ExitUsage = 2
)

// Controller is the command that runs the controller; a command line that starts with a flag,
// or is empty, runs it too.
const Controller = "controller"

// command is one entry of the table.
type command struct {
	name string
	// synopsis follows "karpenter-clevercloud NAME" in the usage line.
	synopsis string
	summary  string
	// about is what `help NAME` says before the flags, one paragraph a string.
	about []string
	// setup registers the command's flags on fs and returns what runs the command once they
	// are parsed; nil for a command without flags that runs elsewhere.
	setup func(fs *flag.FlagSet) runner
	// operands are the words the command accepts after its flags (completion offers them), at
	// most maxOperands of them.
	operands    func() []string
	maxOperands int
	// operand names an operand in messages: "shell", "command".
	operand string
	// usageExit is the exit code of a refused command line.
	usageExit int
	// fileFlags are the flags whose value is a file, completed as one.
	fileFlags []string
}

// runner runs a command whose command line has been accepted.
type runner func(ctx context.Context, operands []string, stdout, stderr io.Writer) int

// commands is the table, in the order the usage lists them.
func commands() []command {
	return []command{
		{
			name:     Controller,
			synopsis: "[flags]",
			summary:  "run the controller, as the bundle's Deployment does",
			about: []string{
				"Runs Karpenter with the Clever Cloud provider against the cluster of the in-cluster config, or of the current kubeconfig out of a cluster. The bundle's Deployment runs it with no arguments and configures it through environment variables: the provider's settings, checked before anything starts (a refused value runs its setting on the default, reported, except where a default cannot be safe), and Karpenter core's options, each of which is also a flag.",
				"Exit code 2: a refused setting without a safe default, or a refused command line. The binary's other commands: " + Name + " help.",
			},
			setup:     coreFlags,
			usageExit: ExitUsage,
		},
		valuesOrPreflight("preflight", "check, read-only, that a cluster can run the provider", []string{
			"Checks, read-only (get and list only), what the provider needs of the cluster of the current kubeconfig: the NodeGroup API and its flavors, the Kubernetes version, signs of CKE's own autoscaler, another Karpenter, where the controller will run, and the organisation quota in use. One line per check.",
			"Exit code 0: every check passed; 2: no check failed, at least one warned; 1: a check failed, the cluster could not be read, or the command line was refused (a script that stops only on failures tests [ $? -ne 1 ], so a mistyped flag must not look like a warning).",
		}, preflight.ExitFail, "kubeconfig", "bundle"),
		valuesOrPreflight("values", "write a values file from what a cluster shows", []string{
			"Writes a values file for the bundle (cue export ./cue -l values: FILE) from what the cluster of the current kubeconfig shows, each choice under a comment saying where it comes from: placement for the topology, flavors, region, quota, and the upstream provider's Helm values where it is installed. It only reads the cluster.",
			"An existing --output file is never replaced without --force. With --image, the file carries the controller image, and the render needs no -t image=.",
			"Exit code 0: written; 1: not written (the cluster could not be read, the file exists, the image is refused); 2: the command line was refused.",
		}, ExitUsage, "kubeconfig", "output"),
		inspectCommand("status", "[flags]", "report what the provider sees: leader, quota, prices, pools, pending pods", []string{
			"Reports, read-only, what the provider shows in the cluster of the current kubeconfig: the leader (Karpenter's lease) and the image it runs, each CleverNodeClass's conditions, the quota state the controller saved (ConfigMap karpenter-clevercloud-quota) and the use counted now, price freshness (PricesCurrent), whether the flavor overrides are in force, the leader's run-time preflight results (read from its metrics through the apiserver's pod proxy, or where to read them), each NodePool's nodes and their cost per hour at the catalogue's prices, and every Pending pod with the latest reason the provider (WaitingOnQuota) or Karpenter gave.",
			"Exit code 0: written (what could not be read is listed); 1: the cluster could not be read; 2: the command line was refused.",
		}, 0),
		inspectCommand("explain", "POD [flags]", "tell why a pod is Pending, and what a node for it would cost", []string{
			"Explains, read-only, where a pod could get a node: for each NodePool, whether its CleverNodeClass is Ready, its taints and requirements admit the pod, then for each flavor whether the NodePool allows it, the pod's requirements and requests fit it, what is left of the NodePool's limits holds it, the organisation quota (the controller's saved state) lets it launch, and no refusal set it aside; then the cheapest node that could hold it now, and the cheapest once the quota allows. The pod's --namespace (or -n) is as kubectl's; the provider's is --controller-namespace.",
			"Exit code 0: written; 1: the cluster or the pod could not be read; 2: the command line was refused.",
		}, 1),
		{
			name:      "version",
			summary:   "print the version (also --version)",
			about:     []string{"Prints the version of this binary, the release it was built from."},
			setup:     func(*flag.FlagSet) runner { return printVersion },
			usageExit: ExitUsage,
		},
		{
			name:     "completion",
			synopsis: "bash|zsh",
			summary:  "print a shell completion script",
			about: []string{
				"Prints a completion script for bash or zsh, generated from the same table as this help. Load it in the current shell with: source <(" + Name + " completion bash), or for zsh: source <(" + Name + " completion zsh) after compinit, or save the zsh script as _" + Name + " in a directory of $fpath.",
			},
			setup:       func(*flag.FlagSet) runner { return printCompletion },
			operands:    func() []string { return shells },
			maxOperands: 1,
			operand:     "shell",
			usageExit:   ExitUsage,
		},
		{
			name:        "help",
			synopsis:    "[command]",
			summary:     "print this, or a command's flags (also --help, -h)",
			about:       []string{"Prints the usage, or a command's: what it does, its flags and exit codes. COMMAND --help does the same."},
			setup:       func(*flag.FlagSet) runner { return printHelp },
			operands:    commandNames,
			maxOperands: 1,
			operand:     "command",
			usageExit:   ExitUsage,
		},
	}
}

// valuesOrPreflight is the entry of a command of controller/preflight, whose flags it declares.
func valuesOrPreflight(name, summary string, about []string, usageExit int, fileFlags ...string) command {
	return command{
		name: name, synopsis: "[flags]", summary: summary, about: about, usageExit: usageExit, fileFlags: fileFlags,
		setup: func(fs *flag.FlagSet) runner {
			var o preflight.Options
			o.AddFlags(fs, name)
			return func(ctx context.Context, _ []string, stdout, stderr io.Writer) int {
				return preflight.Run(ctx, name, o, stdout, stderr)
			}
		},
	}
}

// inspectCommand is the entry of a command of controller/inspect, whose flags it declares.
func inspectCommand(name, synopsis, summary string, about []string, maxOperands int) command {
	return command{
		name: name, synopsis: synopsis, summary: summary, about: about, usageExit: ExitUsage, fileFlags: []string{"kubeconfig"},
		maxOperands: maxOperands, operand: "pod",
		setup: func(fs *flag.FlagSet) runner {
			var o inspect.Options
			o.AddFlags(fs, name)
			return func(ctx context.Context, operands []string, stdout, stderr io.Writer) int {
				return inspect.Run(ctx, name, o, operands, stdout, stderr)
			}
		},
	}
}

// coreFlags registers Karpenter core's flags as its operator does (every options.Injectable),
// on fresh options so that parsing here leaves core's own untouched. The controller itself runs
// in main, after Main returns.
func coreFlags(fs *flag.FlagSet) runner {
	for _, inj := range options.Injectables {
		fresh := reflect.New(reflect.TypeOf(inj).Elem()).Interface().(options.Injectable)
		fresh.AddFlags(&options.FlagSet{FlagSet: fs})
	}
	return nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// Main runs the command line args (the binary's arguments, without its name). start is true
// when the controller is to run, with coreArgs the arguments Karpenter core is to parse (core
// reads os.Args itself); otherwise the process exits with code. A command that reads a cluster
// stops at SIGINT or SIGTERM.
func Main(args []string, stdout, stderr io.Writer) (code int, coreArgs []string, start bool) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, stdout, stderr)
}

// Run is Main on a context.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int, coreArgs []string, start bool) {
	name, rest := Controller, args
	switch {
	case len(args) == 0:
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		writeUsage(stdout)
		return ExitOK, nil, false
	case args[0] == "--version" || args[0] == "-version":
		name, rest = "version", args[1:]
	case !strings.HasPrefix(args[0], "-"):
		name, rest = args[0], args[1:]
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q%s: want one of %s\nRun '%s help' for usage.\n", Name, name, didYouMean(name, commandNames(), ""), strings.Join(commandNames(), ", "), Name)
		return ExitUsage, nil, false
	}
	fs := newFlagSet(cmd)
	run := cmd.setup(fs)
	operands, err := parse(fs, rest)
	if err == nil {
		err = cmd.checkOperands(operands)
	}
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(stdout, cmd)
		return ExitOK, nil, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\nRun '%s help %s' for its usage.\n", Name, name, err, Name, name)
		return cmd.usageExit, nil, false
	}
	if name == Controller {
		return ExitOK, rest, true
	}
	return run(ctx, operands, stdout, stderr), nil, false
}

func newFlagSet(cmd command) *flag.FlagSet {
	fs := flag.NewFlagSet(Name+" "+cmd.name, flag.ContinueOnError)
	// Errors are reported once, by Run, in its own words; the flag package would print its
	// defaults on every mistake.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args strictly: every flag must be known, and flags may follow operands (the
// flag package stops at the first operand, so `preflight extra --kubeconfig X` would otherwise
// leave --kubeconfig unread). Everything after `--` is an operand.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, dashes(fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return operands, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(operands, rest...), nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// dashes rewrites the flag package's errors with the double dash the docs and the help use,
// and suggests the flag an unknown one is likely a typo of.
func dashes(fs *flag.FlagSet, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		return fmt.Errorf("unknown flag --%s%s", name, didYouMean(name, known, "--"))
	}
	for _, p := range []string{"flag needs an argument: -", "for flag -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return errors.New(msg)
}

// checkOperands refuses operands the command does not take, naming each.
func (c command) checkOperands(operands []string) error {
	if len(operands) > c.maxOperands {
		extra := operands[c.maxOperands:]
		return fmt.Errorf("unexpected argument %q (%s takes %s)", strings.Join(extra, " "), c.name, c.operandsWord())
	}
	if c.operands == nil {
		return nil
	}
	want := c.operands()
	for _, o := range operands {
		if !slices.Contains(want, o) {
			return fmt.Errorf("unknown %s %q: want one of %s", c.operand, o, strings.Join(want, ", "))
		}
	}
	return nil
}

func (c command) operandsWord() string {
	if c.maxOperands == 0 {
		return "no arguments"
	}
	return fmt.Sprintf("one %s at most", c.operand)
}

// didYouMean suggests the known word closest to a mistyped one, within two edits, spelled with
// prefix; empty when none is that close.
func didYouMean(word string, known []string, prefix string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(word, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func printVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, version.Version)
	return ExitOK
}

func printHelp(_ context.Context, operands []string, stdout, _ io.Writer) int {
	if len(operands) == 0 {
		writeUsage(stdout)
		return ExitOK
	}
	cmd, _ := lookup(operands[0])
	writeCommandHelp(stdout, cmd)
	return ExitOK
}

func printCompletion(_ context.Context, operands []string, stdout, stderr io.Writer) int {
	if len(operands) == 0 {
		fmt.Fprintf(stderr, "%s completion: which shell? want one of %s\n", Name, strings.Join(shells, ", "))
		return ExitUsage
	}
	if err := writeCompletion(stdout, operands[0]); err != nil {
		fmt.Fprintf(stderr, "%s completion: %v\n", Name, err)
		return 1
	}
	return ExitOK
}
