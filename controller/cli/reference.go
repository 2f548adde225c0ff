package cli

import "flag"

// Command is one command as the reference page (hack/docgen) describes it.
type Command struct {
	// Name is the command's word; Usage its usage line; Summary its line in the usage.
	Name, Usage, Summary string
	// About is what its help says, one paragraph a string.
	About []string
	// Flags are its own flags. The controller's are Karpenter core's, whose defaults read this
	// environment: they are left out, for the page to link core's table instead.
	Flags []Flag
	// Operands are the words it accepts after its flags.
	Operands []string
}

// Flag is one flag of a command.
type Flag struct {
	// Name is without dashes; Kind the kind of its value, empty for a boolean.
	Name, Kind string
	// Default is empty when it is the zero value, Usage what the help says of it.
	Default, Usage string
}

// Spelling is the flag as the help writes it: --name, or -n for a one-letter alias.
func (f Flag) Spelling() string { return dashed(f.Name) }

// Commands are the binary's commands, in the order the usage lists them.
func Commands() []Command {
	var out []Command
	for _, c := range commands() {
		rc := Command{Name: c.name, Usage: c.usage(), Summary: c.summary, About: c.about}
		if c.operands != nil {
			rc.Operands = c.operands()
		}
		if c.name != Controller {
			fs := newFlagSet(c)
			c.setup(fs)
			fs.VisitAll(func(f *flag.Flag) {
				kind, usage := flag.UnquoteUsage(f)
				rf := Flag{Name: f.Name, Kind: kind, Usage: usage}
				if !zeroDefault(f) {
					rf.Default = f.DefValue
				}
				rc.Flags = append(rc.Flags, rf)
			})
		}
		out = append(out, rc)
	}
	return out
}
