// Package controlplane runs a real Kubernetes control plane on loopback: etcd and
// kube-apiserver (through envtest), kube-scheduler, kube-controller-manager and kwok as the
// fake kubelet of every node annotated kwok.x-k8s.io/node=fake whose kubelet is not stopped
// (label sim.clever-cloud.com/kubelet=stopped).
package controlplane

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	simtools "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/tools"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// NodeMonitorGracePeriod and NodeMonitorPeriod are the kube-controller-manager's node
// lifecycle timings, its defaults in Kubernetes 1.37, written out because what a stopped
// kubelet looks like depends on them: a node whose Lease and status went unrenewed for the
// grace period is marked Unknown (reason NodeStatusUnknown) at the next check, every period.
// Live clusters use 40–50 s.
const (
	NodeMonitorGracePeriod = 50 * time.Second
	NodeMonitorPeriod      = 5 * time.Second
)

// kwokOptions raise kwok's workers from 4 each. Every stage and lease renewal is one request;
// with 4 workers, 500 nodes' heartbeats and leases kept the queue full, and a new node waited
// 45 s to be made Ready (Karpenter core's performance suite). The workers wait on the
// apiserver, not on a CPU: more of them cost kwok a few goroutines.
const kwokOptions = `
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodePlayStageParallelism: 32
  podPlayStageParallelism: 32
  nodeLeaseParallelism: 32
`

//go:embed audit-policy.yaml
var auditPolicy []byte

// Options shape the control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok.
	// Defaults to sim/tools.BinDir: $KUBEBUILDER_ASSETS, or the binaries built by build.sh.
	BinDir string
	// Dir receives the kubeconfig, the component logs and the audit log. Defaults to a new
	// temporary folder, removed on Stop unless KeepDir is set.
	Dir     string
	KeepDir bool
	// Audit turns on the apiserver audit log (Metadata level: user, verb, resource) at
	// <Dir>/audit.log.
	Audit bool
	// HonorGracePeriod makes kwok remove terminating pods only when their grace period ends;
	// by default they go at once, like processes that exit on SIGTERM.
	HonorGracePeriod bool
	// NodeStatusReport is how often a node's fake kubelet posts its status when nothing
	// changed, drawn in [0.9, 1.1] of it. Default KubeletStatusReport. A test that waits for a
	// post sets it shorter.
	NodeStatusReport time.Duration
	// StartTimeout bounds each component's start. Default 3 min: make test starts a dozen
	// control planes at once on two cores, and a slow start there is load, not failure.
	StartTimeout time.Duration
	Log          logr.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	opts       Options
	env        *envtest.Environment
	config     *rest.Config
	kubeconfig string
	procs      []*proc
	tmpDir     bool
	startups   startups
}

// Start brings up etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok.
// On error everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, retErr error) {
	if opts.BinDir == "" {
		// Found (or built) outside ctx: a cold build takes minutes, which is no failure to
		// start; a caller whose deadline must cover everything passes a folder found first.
		dir, err := simtools.BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	if opts.NodeStatusReport == 0 {
		opts.NodeStatusReport = KubeletStatusReport
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	cp := &ControlPlane{opts: opts}
	if cp.opts.Dir == "" {
		dir, err := os.MkdirTemp("", "simcke-")
		if err != nil {
			return nil, fmt.Errorf("creating work folder: %w", err)
		}
		cp.opts.Dir, cp.tmpDir = dir, true
	}
	defer func() {
		if retErr != nil {
			_ = cp.Stop()
		}
	}()
	logDir := filepath.Join(cp.opts.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating log folder: %w", err)
	}

	if err := cp.startAPIServer(logDir); err != nil {
		return nil, err
	}
	components, err := cp.components()
	if err != nil {
		return nil, err
	}
	for _, c := range components {
		p, err := startProc(c.name, filepath.Join(opts.BinDir, c.name), c.args, logDir)
		if err != nil {
			return nil, err
		}
		cp.procs = append(cp.procs, p)
	}
	// On a loaded machine a component has been seen to exit while the others started (the
	// kube-controller-manager, once, beside two end-to-end suites): start it again rather than
	// hand out a cluster without it.
	for i, p := range cp.procs {
		for attempt := 1; exited(p) && attempt <= 2; attempt++ {
			opts.Log.Info("control-plane component exited during start-up, starting it again", "component", p.name, "exit", p.cmd.ProcessState.String(), "attempt", attempt)
			p.log.Close()
			c := components[i]
			// The exited one's log stays where it was, for the post-mortem.
			again := filepath.Join(logDir, "restart-"+strconv.Itoa(attempt))
			if err := os.MkdirAll(again, 0o755); err != nil {
				return nil, fmt.Errorf("creating %s: %w", again, err)
			}
			np, err := startProc(c.name, filepath.Join(opts.BinDir, c.name), c.args, again)
			if err != nil {
				return nil, err
			}
			cp.procs[i], p = np, np
		}
	}
	opts.Log.Info("control plane started", "dir", cp.opts.Dir, "apiserver", cp.config.Host)
	return cp, nil
}

func (cp *ControlPlane) startAPIServer(logDir string) error {
	etcdLog, err := os.Create(filepath.Join(logDir, "etcd.log"))
	if err != nil {
		return fmt.Errorf("creating etcd log: %w", err)
	}
	apiLog, err := os.Create(filepath.Join(logDir, "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("creating apiserver log: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    cp.opts.BinDir,
		ControlPlaneStartTimeout: cp.opts.StartTimeout,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = apiLog, apiLog
	// A certificate folder of our own, not envtest's temporary one: envtest deletes its own
	// on stop and makes a new serving CA on the next start, which no client configured
	// before the restart trusts (RestartAPIServer needs the same certificates).
	api.CertDir = filepath.Join(cp.opts.Dir, "apiserver")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating apiserver certificate folder: %w", err)
	}
	if err := TieToParent(env, cp.opts.Dir); err != nil {
		return err
	}
	if cp.opts.Audit {
		policy := filepath.Join(cp.opts.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, auditPolicy, 0o644); err != nil {
			return fmt.Errorf("writing audit policy: %w", err)
		}
		api.Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", cp.AuditLogPath()).
			Set("audit-log-format", "json")
	}
	cfg, err := env.Start()
	cp.env = env
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cp.config = cfg
	if len(env.KubeConfig) == 0 {
		return errors.New("envtest returned no kubeconfig")
	}
	cp.kubeconfig = filepath.Join(cp.opts.Dir, "kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

type component struct {
	name string
	args []string
}

func (cp *ControlPlane) components() ([]component, error) {
	kc := "--kubeconfig=" + cp.kubeconfig
	kcm := []string{kc, "--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--node-monitor-grace-period=" + NodeMonitorGracePeriod.String(),
		"--node-monitor-period=" + NodeMonitorPeriod.String()}
	// envtest leaves its service-account signing key in the apiserver's cert folder; with it
	// the token controller can run, so pods get working ServiceAccount tokens.
	certDir := cp.env.ControlPlane.APIServer.CertDir
	if _, err := os.Stat(filepath.Join(certDir, "sa-signer.key")); err == nil {
		kcm = append(kcm, "--controllers=*,-nodeipam",
			"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file="+filepath.Join(certDir, "apiserver.crt"))
	} else {
		kcm = append(kcm, "--controllers=*,-serviceaccount-token,-nodeipam")
	}
	kwokCfg := filepath.Join(cp.opts.Dir, "kwok.yaml")
	stages := kwokConfig(cp.opts.HonorGracePeriod, cp.opts.NodeStatusReport)
	if err := os.WriteFile(kwokCfg, []byte(stages), 0o644); err != nil {
		return nil, fmt.Errorf("writing kwok config: %w", err)
	}
	return []component{
		{"kube-scheduler", []string{kc, "--leader-elect=false", "--secure-port=0"}},
		{"kube-controller-manager", kcm},
		{"kwok", []string{kc, "--config=" + kwokCfg,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + cke.KwokAnnotation + "=" + cke.KwokManaged,
			// A node labelled so leaves kwok: its kubelet stopped (cke.KubeletLabel says why a
			// label). kwok skips nodes with no label at all under a label selector; every node
			// the simulator registers has labels.
			"--manage-nodes-with-label-selector=" + cke.KubeletLabel + "!=" + cke.KubeletStopped,
			"--node-lease-duration-seconds=40",
			"--cidr=10.244.0.0/16",
			"--node-ip=10.0.0.1",
		}},
	}, nil
}

// KubeletStatusReport is how often a real kubelet posts an unchanged node status
// (nodeStatusReportFrequency); its Lease, renewed every 10 s, carries liveness. The simulator
// once posted every 20–45 s, kwok's own default: at 500 nodes that is 15 Node updates a second
// no cluster sends, each an event for Karpenter core's NodeClaim lifecycle queue, which its
// rate limiter holds to 10 a second at one CPU, so new claims waited minutes to launch.
const KubeletStatusReport = 5 * time.Minute

// kwokConfig is kwok's configuration file: the stages, with pods' grace periods honoured or
// not, a node's status posted every statusReport (0.9–1.1 of it), and kwok's options.
func kwokConfig(honorGracePeriod bool, statusReport time.Duration) string {
	stages := string(kwokStages)
	if honorGracePeriod {
		stages = strings.ReplaceAll(stages, "#GRACE ", "")
	}
	stages = strings.ReplaceAll(stages, "    durationMilliseconds: 0 #REPORT\n    jitterDurationMilliseconds: 0 #REPORT\n",
		fmt.Sprintf("    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n", (statusReport*9/10).Milliseconds(), (statusReport/5).Milliseconds()))
	return stages + kwokOptions
}

// RestartAPIServer kills the kube-apiserver with SIGKILL, as a crash would, runs down (if
// not nil) while it is down, and starts it again on the same address with the same
// certificates, client CA and etcd, so every client configured before reconnects by itself.
// It returns once the new apiserver is ready (/readyz); APIServerStartups records when.
func (cp *ControlPlane) RestartAPIServer(down func()) error {
	api := cp.env.ControlPlane.GetAPIServer()
	pid, err := findProcess("kube-apiserver", "--cert-dir="+api.CertDir)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	// Stop reaps the killed process (envtest's own bookkeeping).
	if err := api.Stop(); err != nil {
		return fmt.Errorf("reaping the killed kube-apiserver: %w", err)
	}
	if down != nil {
		down()
	}
	started := time.Now()
	if err := api.Start(); err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	if err := cp.waitReady(time.Minute); err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	cp.startups.add(Startup{Started: started, Ready: time.Now()})
	cp.opts.Log.Info("kube-apiserver restarted", "address", cp.config.Host)
	return nil
}

// findProcess returns the pid of the one process whose command line holds name and arg.
func findProcess(name, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	found := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != name || !slices.Contains(args[1:], arg) {
			continue
		}
		if found != 0 {
			return 0, fmt.Errorf("two %s processes with %s (%d, %d)", name, arg, found, pid)
		}
		found = pid
	}
	if found == 0 {
		return 0, fmt.Errorf("no %s process with %s", name, arg)
	}
	return found, nil
}

// Config is an admin (system:masters) REST config.
func (cp *ControlPlane) Config() *rest.Config { return rest.CopyConfig(cp.config) }

// KubeconfigPath is the admin kubeconfig file.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// Dir is the work folder (kubeconfig, logs/, audit.log).
func (cp *ControlPlane) Dir() string { return cp.opts.Dir }

// AuditLogPath is where the apiserver writes its audit log when Options.Audit is set.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.opts.Dir, "audit.log") }

// AddUser provisions a client certificate user and returns its REST config; the e2e suite
// uses it to act with exactly the RBAC a component would get.
func (cp *ControlPlane) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding user %q: %w", name, err)
	}
	return u.Config(), nil
}

// Stop stops every component, newest first, and removes the work folder if it made it.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if err := cp.procs[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	cp.procs = nil
	if cp.env != nil {
		if err := cp.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
		}
		cp.env = nil
	}
	if cp.tmpDir && !cp.opts.KeepDir {
		if err := os.RemoveAll(cp.opts.Dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", cp.opts.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// TieToParent makes env start etcd and kube-apiserver (from env.BinaryAssetsDirectory)
// through wrappers, written to dir, that run them under setpriv --pdeathsig: envtest starts
// them in their own process groups but does not tie their lives to ours, so a test binary
// that panics or is killed by its timeout would leave them running; with the wrappers the
// kernel kills them when this process dies. The wrappers are exec'd by the time env.Start
// returns, so dir may be removed then. Without setpriv it leaves env's binaries as they are.
func TieToParent(env *envtest.Environment, dir string) error {
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	etcd, err := deathTied(dir, "etcd", filepath.Join(env.BinaryAssetsDirectory, "etcd"))
	if err != nil {
		return err
	}
	api, err := deathTied(dir, "kube-apiserver", filepath.Join(env.BinaryAssetsDirectory, "kube-apiserver"))
	if err != nil {
		return err
	}
	env.ControlPlane.Etcd.Path = etcd
	env.ControlPlane.GetAPIServer().Path = api
	return nil
}

// deathTied writes a wrapper that runs bin with the parent-death signal set, so the kernel
// kills it if the Go process dies without calling Stop. Without setpriv it returns bin.
func deathTied(dir, name, bin string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin, nil
	}
	path := filepath.Join(dir, name+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL %s \"$@\"\n", setpriv, bin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("writing %s wrapper: %w", name, err)
	}
	return path, nil
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  io.Closer
}

func startProc(name, bin string, args []string, logDir string) (*proc, error) {
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("creating %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group so Stop reaches any children; death signal so a crashed test leaves
	// nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logFile}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited says whether the process has already ended.
func exited(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stop(grace time.Duration) error {
	defer p.log.Close()
	pgid := -p.cmd.Process.Pid
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit", p.name, p.cmd.Process.Pid)
	}
}
