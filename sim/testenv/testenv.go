// Package testenv starts a real kube-apiserver and etcd (the simulated CKE's pinned binaries)
// with every CRD the provider touches: Karpenter's, CleverNodeClass and CKE's NodeGroup, and
// nothing running against them. The controller's integration tests (controller/..., in
// _test.go files only, so that the product never links the simulator) start one per package in
// their TestMain and share it between their tests, which create what they need with the
// helpers here under names no other test uses.
package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/crds"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/controlplane"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	simtools "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/tools"
)

// Env is a running control plane.
type Env struct {
	env    *envtest.Environment
	Config *rest.Config
	Client client.WithWatch
}

// StartTimeout bounds a control plane's start.
const StartTimeout = 5 * time.Minute

// Start brings up apiserver and etcd with the CRDs installed and established.
func Start() (*Env, error) {
	assets, err := simtools.BinDir()
	if err != nil {
		return nil, err
	}
	ng, err := operator.CRD()
	if err != nil {
		return nil, err
	}
	all := append([]*apiextensionsv1.CustomResourceDefinition{crds.CleverNodeClass(), ng}, karpapis.CRDs...)
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  all,
		ErrorIfCRDPathMissing: true,
		// envtest allows 20 s for a start. make test starts a dozen control planes at once
		// beside the end-to-end clusters, on two cores: a start can take minutes there, and
		// that is load, not a failure of the package's tests.
		ControlPlaneStartTimeout: StartTimeout,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Like the simulated CKE's, etcd and the apiserver die with the test binary, even when it
	// panics or hits its timeout before Stop.
	wrappers, err := os.MkdirTemp("", "testenv-")
	if err != nil {
		return nil, fmt.Errorf("creating wrapper folder: %w", err)
	}
	defer os.RemoveAll(wrappers) // exec'd by the time Start returns
	if err := controlplane.TieToParent(e, wrappers); err != nil {
		return nil, err
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest from %s: %w", assets, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("building client: %w", err)
	}
	return &Env{env: e, Config: cfg, Client: c}, nil
}

// NewManager builds a controller-runtime manager on the control plane, as main.go's would be
// but quiet: no metrics listener, no logs, no leader election, and controller names free to
// repeat (several tests of one binary register the same controller).
func (e *Env) NewManager() (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Logger:     logr.Discard(),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("building manager: %w", err)
	}
	return mgr, nil
}

// RunWithManager is the TestMain of a package whose controllers run in a manager: it starts the
// control plane and one manager, lets setup register the package's controllers (and keep what
// its tests need), starts the manager, runs the tests and tears everything down. It returns
// the exit code for os.Exit.
func RunWithManager(m *testing.M, setup func(ctx context.Context, env *Env, mgr ctrl.Manager) error) int {
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	mgr, err := env.NewManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := setup(ctx, env, mgr); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the suite:", err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return m.Run()
}

// Stop tears the control plane down.
func (e *Env) Stop() error { return e.env.Stop() }
