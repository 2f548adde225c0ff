package preflight

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Scheme knows every kind a gathering reads.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = ngv1.AddToScheme(s)
	return s
}

// NewCluster builds a Cluster on a REST config, uncached.
func NewCluster(cfg *rest.Config, cat *catalog.Catalog, namespace string, limit quota.Limit) (Cluster, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return Cluster{}, fmt.Errorf("building a client: %w", err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Cluster{}, fmt.Errorf("building a discovery client: %w", err)
	}
	return Cluster{Client: c, Discovery: d, Catalog: cat, Namespace: namespace, Quota: limit}, nil
}

// Commands are the binary's subcommands this package implements.
var Commands = []string{"preflight", "values"}

// Main runs the preflight or values command with its arguments (after the command's name) and
// returns the process's exit code: for preflight, Report.ExitCode (0 ok, 2 warnings only, 1 a
// failure or an unreadable cluster); for values, 0 when written, 1 otherwise.
func Main(ctx context.Context, command string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	kubecontext := fs.String("context", "", "kubeconfig context (default: the current one)")
	namespace := fs.String("namespace", "karpenter", "namespace the provider runs (or will run) in")
	quotaCPU := fs.Int64("quota-cpu", 0, "organisation quota in vCPU, as settings.quota.cpu (0: CKE's default)")
	quotaGB := fs.Int64("quota-memory", 0, "organisation quota in GB, as settings.quota.memory (0: CKE's default)")
	timeout := fs.Duration("timeout", time.Minute, "give up reading the cluster after this long")
	var bundle, output *string
	switch command {
	case "preflight":
		bundle = fs.String("bundle", "", "a rendered karpenter.yaml whose Deployment's placement to evaluate (default: the installed Deployment, else the bundle's defaults)")
	case "values":
		output = fs.String("output", "karpenter-values.yaml", "file to write the values to; - for standard output")
	default:
		fmt.Fprintf(stderr, "unknown command %q: want one of %v\n", command, Commands)
		return ExitFail
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitFail
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "karpenter-clevercloud %s: %v\n", command, err)
		return ExitFail
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubecontext})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return fail(fmt.Errorf("loading the kubeconfig: %w", err))
	}
	// The catalogue the controller would use with no overrides file: the embedded base.
	cat, err := catalog.Load("", "par", logr.Discard())
	if err != nil {
		return fail(fmt.Errorf("loading the flavor catalogue: %w", err))
	}
	cluster, err := NewCluster(cfg, cat, *namespace, quota.Limit{CPU: *quotaCPU, GB: *quotaGB})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	s, err := Gather(ctx, cluster, FullScope)
	if err != nil {
		return fail(err)
	}
	if command == "values" {
		return writeValues(s, cfg.Host, *output, stdout, stderr)
	}
	placement, err := choosePlacement(s, *bundle)
	if err != nil {
		return fail(err)
	}
	report := Evaluate(s, &placement)
	if err := report.Write(stdout); err != nil {
		return fail(err)
	}
	return report.ExitCode()
}

func writeValues(s *Snapshot, host, output string, stdout, stderr io.Writer) int {
	v := BuildValues(s, "the cluster at "+host)
	w := stdout
	if output != "-" {
		f, err := os.Create(output)
		if err != nil {
			fmt.Fprintf(stderr, "karpenter-clevercloud values: %v\n", err)
			return ExitFail
		}
		defer f.Close()
		w = f
	}
	if err := v.Write(w); err != nil {
		fmt.Fprintf(stderr, "karpenter-clevercloud values: writing %s: %v\n", output, err)
		return ExitFail
	}
	if output != "-" {
		fmt.Fprintf(stderr, "wrote %s; render the install with:\n  cue export ./cue -l values: %s -t image=REGISTRY/NAME@sha256:DIGEST -e stream --out text >install.yaml\n", output, output)
	}
	return ExitOK
}

// choosePlacement is the placement to evaluate: a rendered bundle's when given, else the
// installed Deployment's, else the bundle's defaults.
func choosePlacement(s *Snapshot, bundle string) (Placement, error) {
	if bundle != "" {
		return PlacementFromFile(bundle)
	}
	if p, ok := s.InstalledPlacement(); ok {
		return p, nil
	}
	return DefaultPlacement(), nil
}

// PlacementFromFile reads the placement of the Deployment in a rendered multi-document YAML.
func PlacementFromFile(path string) (Placement, error) {
	f, err := os.Open(path)
	if err != nil {
		return Placement{}, fmt.Errorf("reading the bundle: %w", err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				return Placement{}, fmt.Errorf("%s has no Deployment", path)
			}
			return Placement{}, fmt.Errorf("decoding %s: %w", path, err)
		}
		if d.Kind == "Deployment" {
			return PlacementOf(&d, "the Deployment of "+path), nil
		}
	}
}
