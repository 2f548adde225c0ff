package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
)

// CLIPage is docs/reference/cli.md: the binary's commands from its own table
// (controller/cli), the one its help, its flag parsing and its completion come from.
func CLIPage() []byte {
	cmds := cli.Commands()
	var b bytes.Buffer
	b.WriteString(generatedHeader("Command-line", "go run ./hack/docgen"))
	fmt.Fprintf(&b, "The binary `%s` (`make build`: `bin/%s`) runs the controller, and the read-only\n", cli.Name, cli.Name)
	b.WriteString("commands a user runs against a cluster before installing ([preflight.md](../preflight.md)).\n")
	fmt.Fprintf(&b, "`%s help` prints the commands and the provider's settings from the binary itself,\n", cli.Name)
	fmt.Fprintf(&b, "`%s help COMMAND` (or `COMMAND --help`) one command's part of this page, the controller's\n", cli.Name)
	b.WriteString("with Karpenter core's flags. Shell completion: [completion](#completion).\n\n")
	b.WriteString("Flags may come anywhere after the command, as `--flag value` or `--flag=value`; everything\n")
	b.WriteString("after `--` is an argument. An unknown flag, a stray argument or a bad value is refused with\n")
	fmt.Fprintf(&b, "a message naming it and exit code %d (`preflight`: %d, since its 2 means \"warnings only\"), before\n", cli.ExitUsage, preflight.ExitFail)
	b.WriteString("anything runs.\n\n")
	b.WriteString("| command | what |\n|---|---|\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", strings.ReplaceAll(c.Usage, "|", `\|`), c.Name, cell(c.Summary))
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## %s\n\n```\n%s\n```\n", c.Name, c.Usage)
		for _, p := range c.About {
			b.WriteString("\n" + markdownText(p) + "\n")
		}
		switch {
		case c.Name == cli.Controller:
			b.WriteString("\nIts flags are Karpenter core's, each also read from the variable its name spells\n")
			b.WriteString("(`--metrics-port`: `METRICS_PORT`): [settings.md](settings.md#karpenter-cores-options) lists them.\n")
			b.WriteString("The provider's settings are environment variables only:\n")
			b.WriteString("[settings.md](settings.md#the-providers-settings). Where both read a variable, set the\n")
			b.WriteString("variable, not the flag: the flag reaches core only, past the provider's checks.\n")
		case len(c.Flags) > 0:
			b.WriteString("\n| flag | value | default | what |\n|---|---|---|---|\n")
			for _, f := range c.Flags {
				kind := f.Kind
				if kind == "" {
					kind = "—"
				}
				def := "—"
				if f.Default != "" {
					def = "`" + f.Default + "`"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Spelling(), kind, def, cell(f.Usage))
			}
		}
		if len(c.Operands) > 0 {
			fmt.Fprintf(&b, "\nArguments: one of `%s`.\n", strings.Join(c.Operands, "`, `"))
		}
	}
	return b.Bytes()
}

// markdownText sets the help's commands and file names in code: a help paragraph is plain text.
func markdownText(p string) string {
	for _, code := range []string{
		"cue export ./cue -l values: FILE", "-t image=", "[ $? -ne 1 ]",
		"source <(" + cli.Name + " completion bash)", "source <(" + cli.Name + " completion zsh)",
		"_" + cli.Name, "$fpath", cli.Name + " help",
		"--output", "--force", "--image",
	} {
		p = strings.ReplaceAll(p, code, "`"+code+"`")
	}
	return p
}
