package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"

	"sigs.k8s.io/karpenter/pkg/operator/options"
)

// CoreOption is one flag of Karpenter core's flag set.
type CoreOption struct {
	Flag, Usage string
	// Env is the variable the flag falls back to, empty when none does.
	Env string
	// Default is the value with neither the flag nor the variable set.
	Default string
}

// envMu serialises the environment changes CoreOptions makes.
var envMu sync.Mutex

// CoreOptions are the flags core's Options register, in name order. Core gives each flag's
// default from an environment variable read at registration (env.WithDefault*), which the flag
// set does not record: the variable is found by setting the one the flag's name spells
// (metrics-port: METRICS_PORT) to probe values and seeing a field of the options change. No
// variable core reads is in the environment while the defaults are read, so they are the
// code's, not this shell's.
func CoreOptions() ([]CoreOption, error) {
	envMu.Lock()
	defer envMu.Unlock()
	names := flagNames()
	saved := map[string]string{}
	for _, n := range names {
		env := envName(n)
		if v, ok := os.LookupEnv(env); ok {
			saved[env] = v
		}
		os.Unsetenv(env)
	}
	defer func() {
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}()

	base, fs := register()
	var out []CoreOption
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		o := CoreOption{Flag: f.Name, Usage: f.Usage, Default: f.DefValue}
		env := envName(f.Name)
		field := -1
		for _, probe := range []string{"true", "false", "7777", "7m7s", "docgen-probe"} {
			os.Setenv(env, probe)
			changed, _ := register()
			os.Unsetenv(env)
			if field = differingField(base, changed); field >= 0 {
				o.Env = env
				break
			}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && o.Default == "" {
			// A BoolFunc flag keeps no default; the options field it sets holds it.
			if field < 0 {
				err = fmt.Errorf("--%s: no variable and no field found for its default", f.Name)
				return
			}
			o.Default = fmt.Sprint(reflect.ValueOf(base).Elem().Field(field).Bool())
		}
		out = append(out, o)
	})
	return out, err
}

func flagNames() []string {
	_, fs := register()
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// register builds core's options and flag set as the operator does, from this environment.
func register() (*options.Options, *options.FlagSet) {
	o := &options.Options{}
	fs := &options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	o.AddFlags(fs)
	return o, fs
}

func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// differingField is the index of the first top-level field of two options that differs, -1
// when none does. Unexported fields are compared too, through reflection's read-only access.
func differingField(a, b *options.Options) int {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		if !equal(va.Field(i), vb.Field(i)) {
			return i
		}
	}
	return -1
}

func equal(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Struct:
		for i := range a.NumField() {
			if !equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		return a.IsNil() == b.IsNil()
	default:
		return true
	}
}

// FeatureGates are core's feature gates, in the order --feature-gates lists them.
func FeatureGates() []options.FeatureGate { return options.KarpenterFeatureGates }

// coreVersion is the version of sigs.k8s.io/karpenter this program is built with.
func coreVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "sigs.k8s.io/karpenter" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "(version unknown)"
}
