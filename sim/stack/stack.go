// Package stack is the simulated CKE with the provider installed the way it ships: the
// rendered bundle (out/crds.yaml, out/karpenter.yaml) applied to a real apiserver, and the
// controller binary run out of cluster under the bundle's ServiceAccount identity with the
// Deployment's environment. The demo (sim/cmd/demo), the e2e suites (test/e2e, test/lifecycle,
// test/conformance) and the benchmarks (test/bench) all start it here, so that each runs the
// provider the same way; what they assert lives beside them, in test/harness.
//
// One Env serves a whole process. Callers share it one after the other: test/harness's
// Scenario deletes what a test created and checks that nothing was left behind.
package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
	simtools "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/tools"
)

// ServiceAccount is the identity the controller runs as, the bundle's.
const (
	SystemNamespace    = "karpenter"
	ServiceAccountName = "karpenter"
	ServiceAccountUser = "system:serviceaccount:" + SystemNamespace + ":" + ServiceAccountName
)

// ServiceAccountGroups are the groups the apiserver gives a ServiceAccount token's bearer.
var ServiceAccountGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + SystemNamespace, "system:authenticated"}

// Options shape an Env.
type Options struct {
	// Sim is the simulated CKE; SuiteSimOptions by default.
	Sim *sim.Options
	// Binary is a prebuilt controller; ControllerBinary's when empty.
	Binary string
	// BundleDir holds the rendered bundle to install (crds.yaml, karpenter.yaml); the
	// repository's out/ when empty. The lifecycle suite installs a previous release's.
	BundleDir string
	// Logf receives progress lines; silent when nil.
	Logf func(format string, args ...any)
	// WorkDir receives the controller binary, its kubeconfig, logs and files, and the
	// simulated CKE's folder (cluster-*/) unless Sim.Dir says otherwise. Required.
	WorkDir string
	// Env overrides the Deployment's environment for the first controller start.
	Env map[string]string
	// Extra are YAML files applied after the bundle and before the controller starts, their
	// CRDs first and served before the rest: what another controller binary needs beyond the
	// bundle (the performance suite's baseline runs core's kwok provider).
	Extra []string
}

// SuiteSimOptions are the simulator's fast profile with the timings of the e2e suite: the
// decision 1 s after creation, the node joined at 3 s, Synced at 4–5 s, teardown 2 s, and the
// apiserver audit log on (the RBAC proof reads it).
func SuiteSimOptions() sim.Options {
	o := sim.FastOptions()
	o.Audit = true
	o.Operator.DecisionDelay = time.Second
	o.Operator.JoinDelay = 3 * time.Second
	o.Operator.SyncDelayMin, o.Operator.SyncDelayMax = 4*time.Second, 5*time.Second
	o.Operator.TeardownDelay = 2 * time.Second
	o.Operator.VanishDelay = time.Second
	o.Operator.SlowBootDelay = 30 * time.Second
	return o
}

// Env is a simulated CKE with the bundle applied and the controller running.
type Env struct {
	Cluster *sim.Cluster
	// Client is an admin client that knows every kind the suite touches.
	Client client.WithWatch
	// Kube is an admin clientset (events, logs).
	Kube *kubernetes.Clientset
	// Prices is the fake public price API the controller's refresher reads.
	Prices    *priceapi.Server
	PricesURL string
	Bundle    *Bundle
	// OperatorDefaults are the node-group operator's options at start; RestoreOperator
	// puts them back.
	OperatorDefaults operator.Options

	dir        string
	root       string
	binary     string
	kubeconfig string
	priceSrv   *httptest.Server
	ctrl       *Controller
	gen        int
	progress   func(format string, args ...any)
}

// ModuleRoot is the repository root, found from this file (sim/stack).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts the simulated CKE and the fake price API, applies the rendered bundle, writes
// the ServiceAccount's kubeconfig and starts the controller.
func Start(ctx context.Context, opts Options) (_ *Env, retErr error) {
	if opts.WorkDir == "" {
		return nil, errors.New("stack: Options.WorkDir is required")
	}
	e := &Env{dir: opts.WorkDir, root: ModuleRoot(), binary: opts.Binary, progress: opts.Logf}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()
	bundleDir := opts.BundleDir
	if bundleDir == "" {
		bundleDir = filepath.Join(e.root, "out")
	}
	bundle, err := LoadBundle(bundleDir)
	if err != nil {
		return nil, err
	}
	e.Bundle = bundle
	step := time.Now()
	if e.binary == "" {
		// No deadline of ctx's: a build from a cold cache on a busy machine takes minutes,
		// which is no failure of the environment.
		if e.binary, err = ControllerBinary(context.Background(), e.dir); err != nil {
			return nil, err
		}
		e.logf("controller %s ready in %s", e.binary, time.Since(step).Round(100*time.Millisecond))
		step = time.Now()
	}
	so := SuiteSimOptions()
	if opts.Sim != nil {
		so = *opts.Sim
	}
	if so.Dir == "" {
		// The cluster's logs and audit log live beside the controller's, so a suite that
		// fails keeps them all for the post-mortem (RunSuite removes the work dir only on
		// success).
		if so.Dir, err = os.MkdirTemp(e.dir, "cluster-"); err != nil {
			return nil, fmt.Errorf("creating the simulated CKE's folder: %w", err)
		}
	}
	if so.BinDir == "" {
		if so.BinDir, err = simtools.BinDir(); err != nil {
			return nil, err
		}
	}
	if e.Cluster, err = sim.Start(ctx, so); err != nil {
		return nil, fmt.Errorf("starting the simulated CKE: %w", err)
	}
	e.OperatorDefaults = e.Cluster.Operator().Options()
	e.logf("simulated CKE up in %s (%s)", time.Since(step).Round(100*time.Millisecond), e.Cluster.Dir())
	step = time.Now()
	if e.Client, err = client.NewWithWatch(e.Cluster.Config(), client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}
	if e.Kube, err = kubernetes.NewForConfig(e.Cluster.Config()); err != nil {
		return nil, err
	}
	e.Prices = priceapi.New()
	e.priceSrv = httptest.NewServer(e.Prices)
	e.PricesURL = e.priceSrv.URL

	if err := e.applyBundle(ctx); err != nil {
		return nil, err
	}
	if err := e.applyExtra(ctx, opts.Extra); err != nil {
		return nil, err
	}
	cfg, err := e.Cluster.AddUser(ServiceAccountUser, ServiceAccountGroups...)
	if err != nil {
		return nil, err
	}
	e.kubeconfig = filepath.Join(e.dir, "karpenter.kubeconfig")
	if err := writeKubeconfig(e.kubeconfig, cfg); err != nil {
		return nil, err
	}
	e.logf("bundle applied in %s", time.Since(step).Round(100*time.Millisecond))
	step = time.Now()
	if err := e.StartController(ctx, opts.Env); err != nil {
		return nil, err
	}
	e.logf("controller healthy in %s (log %s)", time.Since(step).Round(100*time.Millisecond), e.ctrl.LogPath)
	return e, nil
}

// Dir is the environment's work folder.
func (e *Env) Dir() string { return e.dir }

// Kubeconfig is the controller's kubeconfig: the bundle's ServiceAccount identity.
func (e *Env) Kubeconfig() string { return e.kubeconfig }

// Controller is the running (or last) controller process.
func (e *Env) Controller() *Controller { return e.ctrl }

// RestoreOperator puts the node-group operator back to its start-up options and drops leaked
// quota reservations.
func (e *Env) RestoreOperator() {
	d := e.OperatorDefaults
	e.Cluster.Operator().Configure(func(o *operator.Options) { *o = d })
	e.Cluster.Operator().ResetQuotaEngine()
}

// Stop stops the controller, the price API and the cluster.
func (e *Env) Stop() error {
	var errs []error
	if e.ctrl != nil {
		if err := e.ctrl.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.priceSrv != nil {
		e.Prices.Close()
		e.priceSrv.Close()
	}
	if e.Cluster != nil {
		if err := e.Cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyBundle applies the CRDs, waits for them to be served, then applies the installation
// objects that make sense out of cluster (everything but the workload objects).
func (e *Env) applyBundle(ctx context.Context) error {
	return e.install(ctx, e.Bundle.CRDs, e.Bundle.Install())
}

// applyExtra applies files' objects the same way: CRDs first, served before the rest.
func (e *Env) applyExtra(ctx context.Context, files []string) error {
	var crds, rest []*unstructured.Unstructured
	for _, f := range files {
		objs, err := DecodeFile(f)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if u.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, u)
			} else {
				rest = append(rest, u)
			}
		}
	}
	return e.install(ctx, crds, rest)
}

// install applies crds, waits for each to be served, then applies objs, which may be of their
// kinds.
func (e *Env) install(ctx context.Context, crds, objs []*unstructured.Unstructured) error {
	if err := e.Apply(ctx, crds...); err != nil {
		return err
	}
	for _, u := range crds {
		if err := e.waitEstablished(ctx, u.GetName()); err != nil {
			return err
		}
	}
	return e.Apply(ctx, objs...)
}

func (e *Env) waitEstablished(ctx context.Context, name string) error {
	return Poll(ctx, 60*time.Second, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not Established", name)
	})
}

// Poll calls check until it returns nil or timeout passes; for waits outside a test (tests
// use gomega's Eventually).
func Poll(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// GVKs the suite cares about, for messages.
var (
	NodeClaimGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}
	NodeClassGVK = schema.GroupVersionKind{Group: v1alpha1.Group, Version: "v1alpha1", Kind: "CleverNodeClass"}
)

func (e *Env) logf(format string, args ...any) {
	if e.progress != nil {
		e.progress(format, args...)
	}
}
