// Package inspect answers, read-only and from a kubeconfig, what the provider thinks
// (status) and why a given pod is Pending (explain): what the controller publishes in the
// cluster (its lease, the CleverNodeClasses' conditions, the quota state ConfigMap, events
// on pods, NodePools and NodeClaims), laid over the flavor catalogue and Karpenter's own
// scheduling rules. Nothing here writes.
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Exit codes: the report was written; the cluster or the pod could not be read; the command
// line was refused (the binary's own code for it).
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// Options are the flags of the status and explain commands.
type Options struct {
	Kubeconfig, Context string
	// Namespace is the controller's; PodNamespace explain's pod's (empty: the context's).
	Namespace, PodNamespace string
	Output                  string
	Timeout                 time.Duration
}

// AddFlags registers command's flags on fs, bound to o. explain's --namespace (and -n) is the
// pod's, as kubectl's; the controller's is then --controller-namespace.
func (o *Options) AddFlags(fs *flag.FlagSet, command string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.Output, "output", "text", "text, for people, or json")
	fs.StringVar(&o.Output, "o", "text", "as --output")
	fs.DurationVar(&o.Timeout, "timeout", time.Minute, "give up reading the cluster after this long")
	if command == "explain" {
		fs.StringVar(&o.PodNamespace, "namespace", "", "the pod's namespace (default: the kubeconfig context's, else default)")
		fs.StringVar(&o.PodNamespace, "n", "", "the pod's namespace, as --namespace")
		fs.StringVar(&o.Namespace, "controller-namespace", "karpenter", "namespace the provider runs in")
		return
	}
	fs.StringVar(&o.Namespace, "namespace", "karpenter", "namespace the provider runs in")
}

// Run runs status or explain (operands: the pod's name) and returns the exit code.
func Run(ctx context.Context, command string, o Options, operands []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "karpenter-clevercloud %s: %v\n", command, err)
		return ExitFail
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "karpenter-clevercloud %s: %v\nRun 'karpenter-clevercloud help %s' for its usage.\n", command, err, command)
		return ExitUsage
	}
	if o.Output != "text" && o.Output != "json" {
		return usage(fmt.Errorf("--output %q: want text or json", o.Output))
	}
	if command == "explain" && len(operands) != 1 {
		return usage(errors.New("which pod? give its name: explain POD [-n NAMESPACE]"))
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return fail(fmt.Errorf("loading the kubeconfig: %w", err))
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fail(fmt.Errorf("building a client: %w", err))
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("building a clientset: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		return fail(fmt.Errorf("reading the apiserver's version (is the kubeconfig's cluster reachable?): %w", err))
	}
	s := read(ctx, c, ProxyMetrics(kube), o.Namespace)
	if command == "status" {
		pods := &corev1.PodList{}
		if s.record("pending pods", c.List(ctx, pods, client.MatchingFields{"status.phase": string(corev1.PodPending)})) {
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					s.Pods = append(s.Pods, p)
				}
			}
		}
		return write(o.Output, stdout, BuildStatus(s), func(w io.Writer, v Status) error { return WriteStatus(w, v) }, fail)
	}
	ns := o.PodNamespace
	if ns == "" {
		if ns, _, err = kc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: operands[0]}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(fmt.Errorf("pod %s/%s not found", ns, operands[0]))
		}
		return fail(fmt.Errorf("reading pod %s/%s: %w", ns, operands[0], err))
	}
	return write(o.Output, stdout, Explain(s, pod), func(w io.Writer, v Explanation) error { return WriteExplanation(w, v) }, fail)
}

func write[T any](format string, w io.Writer, v T, text func(io.Writer, T) error, fail func(error) int) int {
	var err error
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = text(w, v)
	}
	if err != nil {
		return fail(fmt.Errorf("writing: %w", err))
	}
	return ExitOK
}
