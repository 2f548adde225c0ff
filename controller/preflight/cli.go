package preflight

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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

// Options are the flags of the preflight and values commands.
type Options struct {
	Kubeconfig, Context, Namespace string
	QuotaCPU, QuotaGB              int64
	Timeout                        time.Duration
	// Bundle is preflight's rendered bundle whose placement to evaluate.
	Bundle string
	// Output, Image and Force are values': where to write, the image to put in, and whether an
	// existing file may be replaced.
	Output, Image string
	Force         bool
}

// AddFlags registers command's flags on fs, bound to o. The binary's CLI (controller/cli)
// parses them, so that its help, its completion and this command read the same flag set.
func (o *Options) AddFlags(fs *flag.FlagSet, command string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.Namespace, "namespace", "karpenter", "namespace the provider runs (or will run) in")
	fs.Int64Var(&o.QuotaCPU, "quota-cpu", 0, "organisation quota in vCPU, as settings.quota.cpu (0: CKE's default)")
	fs.Int64Var(&o.QuotaGB, "quota-memory", 0, "organisation quota in GB, as settings.quota.memory (0: CKE's default)")
	fs.DurationVar(&o.Timeout, "timeout", time.Minute, "give up reading the cluster after this long")
	switch command {
	case "preflight":
		fs.StringVar(&o.Bundle, "bundle", "", "a rendered karpenter.yaml whose Deployment's placement to evaluate (default: the installed Deployment, else the bundle's defaults)")
	case "values":
		fs.StringVar(&o.Output, "output", "karpenter-values.yaml", "file to write the values to; - for standard output")
		fs.StringVar(&o.Image, "image", "", "the controller image the cluster pulls, by digest or tag, written as image.reference (default: none, given at render with -t image=)")
		fs.BoolVar(&o.Force, "force", false, "replace the output file if it exists")
	}
}

// Run runs the preflight or values command and returns the process's exit code: for
// preflight, Report.ExitCode (0 ok, 2 warnings only, 1 a failure or an unreadable cluster);
// for values, 0 when written, 1 otherwise.
func Run(ctx context.Context, command string, o Options, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "karpenter-clevercloud %s: %v\n", command, err)
		return ExitFail
	}
	if command != "preflight" && command != "values" {
		return fail(fmt.Errorf("unknown command %q: want preflight or values", command))
	}
	// What values can refuse without the cluster is refused before a read that may take its
	// whole --timeout.
	if command == "values" {
		if o.Image != "" {
			if err := CheckImage(o.Image); err != nil {
				return fail(fmt.Errorf("--image: %w", err))
			}
		}
		if err := checkOutput(o.Output, o.Force); err != nil {
			return fail(err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return fail(fmt.Errorf("loading the kubeconfig: %w", err))
	}
	// The catalogue the controller would use with no overrides file: the embedded base.
	cat, err := catalog.Load("", "par", logr.Discard())
	if err != nil {
		return fail(fmt.Errorf("loading the flavor catalogue: %w", err))
	}
	cluster, err := NewCluster(cfg, cat, o.Namespace, quota.Limit{CPU: o.QuotaCPU, GB: o.QuotaGB})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	s, err := Gather(ctx, cluster, FullScope)
	if err != nil {
		return fail(err)
	}
	if command == "values" {
		return writeValues(s, cfg.Host, o, stdout, stderr)
	}
	placement, err := choosePlacement(s, o.Bundle)
	if err != nil {
		return fail(err)
	}
	report := Evaluate(s, &placement)
	if err := report.Write(stdout); err != nil {
		return fail(err)
	}
	return report.ExitCode()
}

// checkOutput refuses an output file that exists, unless force: a values file is where a user
// keeps their edits, and writing over it silently would lose them.
func checkOutput(output string, force bool) error {
	if output == "" {
		return errors.New("--output is empty: give a file, or - for standard output")
	}
	if output == "-" || force {
		return nil
	}
	if _, err := os.Lstat(output); err == nil {
		return fmt.Errorf("%s exists: pass --force to replace it, or --output another file", output)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--output %s: %w", output, err)
	}
	return nil
}

func writeValues(s *Snapshot, host string, o Options, stdout, stderr io.Writer) int {
	v := BuildValues(s, "the cluster at "+host)
	if o.Image != "" {
		v.SetImage(o.Image, "Given with --image.")
	}
	// The whole file is encoded before it is written, so that a failure leaves no half file.
	var b bytes.Buffer
	if err := v.Write(&b); err != nil {
		fmt.Fprintf(stderr, "karpenter-clevercloud values: %v\n", err)
		return ExitFail
	}
	if o.Output == "-" {
		if _, err := stdout.Write(b.Bytes()); err != nil {
			fmt.Fprintf(stderr, "karpenter-clevercloud values: writing: %v\n", err)
			return ExitFail
		}
		return ExitOK
	}
	// O_EXCL keeps the refusal true even for a file created while the cluster was read.
	mode := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if o.Force {
		mode = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(o.Output, mode, 0o644)
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("%s exists: pass --force to replace it, or --output another file", o.Output)
	}
	if err != nil {
		fmt.Fprintf(stderr, "karpenter-clevercloud values: %v\n", err)
		return ExitFail
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "karpenter-clevercloud values: writing %s: %v\n", o.Output, err)
		return ExitFail
	}
	fmt.Fprintf(stderr, "wrote %s; render the install with:\n  %s\n", o.Output, v.RenderCommand(o.Output))
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
