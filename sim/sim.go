// Package sim starts a simulated Clever Kubernetes Engine on loopback: a real control plane
// (etcd, kube-apiserver, kube-scheduler, kube-controller-manager), kwok as the kubelet of
// every simulated node, CKE's schedulable control-plane nodes, and the simulated node-group
// operator. Tests, the e2e suite, `make demo` and cmd/simcke all start it through Start.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/controlplane"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

// OperatorUser is the identity the simulated node-group operator acts as, so audit logs tell
// its requests from the provider's.
const OperatorUser = "system:clever-cloud:nodegroup-operator"

// Options shape the simulated CKE. Start from LiveOptions (measured timings) or FastOptions
// (tests).
type Options struct {
	// Options shape the control plane; its fields are promoted: BinDir (the pinned binaries,
	// sim/tools.BinDir by default: $KUBEBUILDER_ASSETS, or build.sh's output), Dir (kubeconfig, logs/
	// and audit.log; a temporary folder by default, removed by Stop unless KeepDir), Audit,
	// HonorGracePeriod and StartTimeout. Its Log, the control plane's own, is shadowed by Log
	// below and discards by default.
	controlplane.Options

	// ControlPlaneNodes schedulable control-plane Nodes of ControlPlaneFlavor are created,
	// labelled clever-cloud.com/cluster-node-role=control-plane and counted in the quota.
	ControlPlaneNodes  int
	ControlPlaneFlavor string
	// WorkerPool, if set, is a NodeGroup created at start-up, as CKE clusters that predate
	// Karpenter have; Start waits for its nodes.
	WorkerPool *WorkerPool

	Operator operator.Options
	// Log receives the simulator's own logs; by default they go to <Dir>/logs/operator.log.
	Log *logr.Logger
}

// WorkerPool is a pre-existing NodeGroup not created by Karpenter.
type WorkerPool struct {
	Name   string
	Flavor string
	Nodes  int32
}

// LiveOptions is CKE as measured on live clusters: two S
// control-plane nodes, quota 40 vCPU / 40 GB, decision ~1 s after creation, node joined
// drawn in 26–60 s (median 28 s) with a 185 s outlier for 2 % of the groups, Synced drawn
// in 38–58 s with a 6 min 30 s outlier for 2 % of the groups, Node gone
// 35 s after a delete, and the quota engine's quirks on (concurrent creations judged
// together, leaked reservations for 3 minutes).
func LiveOptions() Options {
	return Options{
		ControlPlaneNodes:  2,
		ControlPlaneFlavor: "S",
		Operator: operator.Options{
			QuotaCPU:              cke.DefaultQuotaCPU,
			QuotaRAMGB:            cke.DefaultQuotaRAMGB,
			DecisionDelay:         time.Second,
			JoinDelay:             26 * time.Second,
			JoinDelayMax:          time.Minute,
			SlowJoinProbability:   0.02,
			SyncDelayMin:          38 * time.Second,
			SyncDelayMax:          58 * time.Second,
			SlowSyncProbability:   0.02,
			SlowSyncDelay:         6*time.Minute + 30*time.Second,
			Seed:                  1,
			TeardownDelay:         35 * time.Second,
			VanishDelay:           5 * time.Second,
			SlowBootDelay:         185 * time.Second,
			UpstreamErrorDuration: time.Hour,
			QuotaBatchWindow:      time.Second,
			LeakedReservationTTL:  3 * time.Minute,
		},
	}
}

// FastOptions is the same sequence as LiveOptions compressed for tests that are not about
// timing: decision 200 ms, join 1 s, Synced 2–3 s (always after the join), teardown 1 s, no
// slow outliers, quota-engine quirks off.
func FastOptions() Options {
	o := LiveOptions()
	op := &o.Operator
	op.DecisionDelay = 200 * time.Millisecond
	op.JoinDelay, op.JoinDelayMax, op.SlowJoinProbability = time.Second, 0, 0
	op.SyncDelayMin, op.SyncDelayMax = 2*time.Second, 3*time.Second
	op.SlowSyncProbability, op.SlowSyncDelay = 0, 10*time.Second
	op.TeardownDelay = time.Second
	op.VanishDelay = time.Second
	op.SlowBootDelay = 10 * time.Second
	op.UpstreamErrorDuration = 3 * time.Second
	op.QuotaBatchWindow, op.LeakedReservationTTL = 0, 0
	return o
}

// Cluster is a running simulated CKE.
type Cluster struct {
	cp       *controlplane.ControlPlane
	client   client.Client
	scheme   *runtime.Scheme
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
	logFile  *os.File
	operator *operator.Operator
}

// Scheme knows the built-in types, CRDs and NodeGroup.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = ngv1.AddToScheme(s)
	return s
}

// Start brings the simulated CKE up and returns once its nodes are Ready. Stop it with Stop;
// if the process dies instead, the kernel kills every component.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	cp, err := controlplane.Start(ctx, opts.Options)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cp: cp, scheme: Scheme(), done: make(chan error, 1)}
	defer func() {
		if retErr != nil {
			_ = c.Stop()
		}
	}()
	log, err := c.logger(opts.Log)
	if err != nil {
		return nil, err
	}
	c.client, err = client.New(cp.Config(), client.Options{Scheme: c.scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	if err := operator.InstallCRD(ctx, c.client); err != nil {
		return nil, err
	}
	if err := c.createControlPlaneNodes(ctx, opts); err != nil {
		return nil, err
	}
	if err := c.startOperator(opts, log); err != nil {
		return nil, err
	}
	if wp := opts.WorkerPool; wp != nil {
		g := &ngv1.NodeGroup{Spec: ngv1.NodeGroupSpec{Flavor: wp.Flavor, NodeCount: wp.Nodes}}
		g.Name = wp.Name
		if err := c.client.Create(ctx, g); err != nil {
			return nil, fmt.Errorf("creating worker pool NodeGroup %q: %w", wp.Name, err)
		}
	}
	if err := c.waitReady(ctx, opts); err != nil {
		return nil, err
	}
	log.Info("simulated CKE ready", "kubeconfig", cp.KubeconfigPath())
	return c, nil
}

func (c *Cluster) logger(l *logr.Logger) (logr.Logger, error) {
	if l != nil {
		return *l, nil
	}
	f, err := os.Create(filepath.Join(c.cp.Dir(), "logs", "operator.log"))
	if err != nil {
		return logr.Logger{}, fmt.Errorf("creating operator log: %w", err)
	}
	c.logFile = f
	return zap.New(zap.WriteTo(f), zap.UseDevMode(false)), nil
}

func (c *Cluster) createControlPlaneNodes(ctx context.Context, opts Options) error {
	if opts.ControlPlaneNodes == 0 {
		return nil
	}
	flavor, ok := cke.LookupFlavor(opts.ControlPlaneFlavor)
	if !ok {
		return fmt.Errorf("unknown control-plane flavor %q", opts.ControlPlaneFlavor)
	}
	for i := range opts.ControlPlaneNodes {
		n := cke.NewNode(cke.NodeSpec{
			Name: "control-plane-" + strconv.Itoa(i), Flavor: flavor, Role: ngv1.NodeRoleControlPlane,
			Topology: opts.Operator.StampTopologyLabels,
		})
		if err := c.client.Create(ctx, n); err != nil {
			return fmt.Errorf("creating control-plane node %q: %w", n.Name, err)
		}
	}
	return nil
}

func (c *Cluster) startOperator(opts Options, log logr.Logger) error {
	cfg, err := c.cp.AddUser(OperatorUser, "system:masters")
	if err != nil {
		return err
	}
	// The platform judges each group on its own; client-go's default 5 QPS would make the
	// simulator accept a burst one group at a time and blame the provider for it.
	cfg.QPS, cfg.Burst = 200, 400
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 c.scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("creating operator manager: %w", err)
	}
	oo := opts.Operator
	oo.Log = log.WithName("nodegroup-operator")
	c.operator = operator.New(mgr.GetClient(), oo)
	if err := c.operator.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering node-group operator: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- mgr.Start(ctx) }()
	return nil
}

// waitReady waits for the control-plane and worker-pool nodes to be Ready and for the
// default ServiceAccount, without which no pod can be created.
func (c *Cluster) waitReady(ctx context.Context, opts Options) error {
	want := opts.ControlPlaneNodes
	if opts.WorkerPool != nil {
		want += int(opts.WorkerPool.Nodes)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes := &corev1.NodeList{}
		if err := c.client.List(ctx, nodes); err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			if NodeReady(&n) {
				ready++
			}
		}
		if ready < want {
			last = fmt.Sprintf("%d of %d nodes Ready", ready, want)
			return false, nil
		}
		sa := &corev1.ServiceAccount{}
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, sa); err != nil {
			if !apierrors.IsNotFound(err) {
				last = err.Error()
			} else {
				last = "no default ServiceAccount yet"
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the cluster to be ready (%s; logs in %s): %w", last, c.cp.Dir(), err)
	}
	return nil
}

// NodeReady reports whether a Node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Config is an admin REST config.
func (c *Cluster) Config() *rest.Config { return c.cp.Config() }

// KubeconfigPath is the admin kubeconfig file.
func (c *Cluster) KubeconfigPath() string { return c.cp.KubeconfigPath() }

// Client is an admin client that knows NodeGroup.
func (c *Cluster) Client() client.Client { return c.client }

// Operator is the simulated node-group operator; its Configure changes quota, delays,
// faults and quirks while the cluster runs.
func (c *Cluster) Operator() *operator.Operator { return c.operator }

// RestartAPIServer kills the kube-apiserver (SIGKILL, mid-request) and starts it again on
// the same address with the same certificates and etcd, so every client (the node-group
// operator, the controllers, kwok, a provider under test) can reconnect. down, if not nil,
// runs while the apiserver is down.
func (c *Cluster) RestartAPIServer(down func()) error { return c.cp.RestartAPIServer(down) }

// APIServerStartups are RestartAPIServer's starts so far, each up to when the apiserver was
// ready: a request it denied before then may be its unsynced authorizer's, not RBAC's.
func (c *Cluster) APIServerStartups() []controlplane.Startup { return c.cp.APIServerStartups() }

// NodeMonitorGracePeriod is how long the node lifecycle controller waits for a node's Lease
// or status before marking the node Unknown; it checks every NodeMonitorPeriod.
const (
	NodeMonitorGracePeriod = controlplane.NodeMonitorGracePeriod
	NodeMonitorPeriod      = controlplane.NodeMonitorPeriod
)

// StopKubelet makes the kubelet of node stop reporting, as that of a VM that died or of a
// node cut off by a network partition: its Lease is no longer renewed and its status no
// longer posted (its pods are left as they are), so the node lifecycle controller marks its
// conditions Unknown, reason NodeStatusUnknown, and taints it unreachable, from
// NodeMonitorGracePeriod − 10 s (the Lease is renewed every 10 s) to NodeMonitorGracePeriod +
// NodeMonitorPeriod after the call. The Node object and its Lease stay. It labels the Node
// cke.KubeletLabel=cke.KubeletStopped, as `kubectl label` can.
//
// Stop a kubelet that has been running a moment: kwok v0.8.0 misses a stop that lands during
// its first write of the node's Lease, milliseconds after the node joins or StartKubelet.
func (c *Cluster) StopKubelet(ctx context.Context, node string) error {
	return c.labelKubelet(ctx, node, cke.KubeletStopped)
}

// StartKubelet brings the kubelet of node back after StopKubelet: it reports the node Ready
// and renews its Lease at once, and the node lifecycle controller lifts the unreachable
// taints at its next check. It removes cke.KubeletLabel.
func (c *Cluster) StartKubelet(ctx context.Context, node string) error {
	return c.labelKubelet(ctx, node, nil)
}

// labelKubelet sets cke.KubeletLabel to value, or removes it for nil.
func (c *Cluster) labelKubelet(ctx context.Context, node string, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{cke.KubeletLabel: value}}})
	if err != nil {
		return fmt.Errorf("encoding the kubelet label patch: %w", err)
	}
	n := &corev1.Node{}
	n.Name = node
	if err := c.client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		verb := "stopping"
		if value == nil {
			verb = "starting"
		}
		return fmt.Errorf("%s the kubelet of node %q: %w", verb, node, err)
	}
	return nil
}

// Dir is the work folder: kubeconfig, logs/, audit.log.
func (c *Cluster) Dir() string { return c.cp.Dir() }

// AuditLogPath is the apiserver audit log (Options.Audit).
func (c *Cluster) AuditLogPath() string { return c.cp.AuditLogPath() }

// AddUser provisions a certificate user (no RBAC of its own unless groups grant some).
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	return c.cp.AddUser(name, groups...)
}

// Stop stops the operator and every process, and removes the work folder if Start made it.
// It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.cancel != nil {
			c.cancel()
			select {
			case err := <-c.done:
				if err != nil {
					errs = append(errs, fmt.Errorf("node-group operator: %w", err))
				}
			case <-time.After(30 * time.Second):
				errs = append(errs, errors.New("node-group operator did not stop within 30s"))
			}
		}
		if c.logFile != nil {
			_ = c.logFile.Close()
		}
		if err := c.cp.Stop(); err != nil {
			errs = append(errs, err)
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
