package main

import (
	"flag"
	"io"
	"testing"
)

func TestEnvFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
		err  bool
	}{
		{name: "one pair", args: []string{"-env", "COST_STEERING=false"}, want: "COST_STEERING=false"},
		{name: "pairs, comma-separated and repeated, the last value wins",
			args: []string{"-env", "B=2, A=1", "-env", "B=3"}, want: "A=1,B=3"},
		{name: "an empty value is a value", args: []string{"-env", "A="}, want: "A="},
		{name: "no equals sign", args: []string{"-env", "COST_STEERING"}, err: true},
		{name: "no key", args: []string{"-env", "=false"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e envFlag
			fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Var(&e, "env", "")
			err := fs.Parse(tc.args)
			if tc.err {
				if err == nil {
					t.Fatalf("parsed %v as %q, want an error", tc.args, e.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
