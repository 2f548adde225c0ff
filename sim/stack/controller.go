package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
)

// Controller is one run of the controller binary.
type Controller struct {
	// Env is the environment it was started with (only the variables the stack sets).
	Env        map[string]string
	LogPath    string
	MetricsURL string
	HealthURL  string
	cmd        *exec.Cmd
	logFile    *os.File
	done       chan struct{}
	waitErr    error
	exitedAt   time.Time
	stopOnce   sync.Once
	killedByUs bool
	// stopMark is the log's line count when SIGTERM was sent; -1 before.
	stopMark int
}

// DeploymentEnv is the controller's environment as the bundle's Deployment gives it, with
// downward-API references resolved as the kubelet would: metadata.namespace is the system
// namespace, limits.memory the container's limit in bytes.
func (b *Bundle) DeploymentEnv() (map[string]string, error) {
	c := b.Container()
	out := map[string]string{}
	for _, ev := range c.Env {
		switch {
		case ev.ValueFrom == nil:
			out[ev.Name] = ev.Value
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out[ev.Name] = b.Deployment.Namespace
		case ev.ValueFrom.ResourceFieldRef != nil:
			r := ev.ValueFrom.ResourceFieldRef
			var q = c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(r.Resource, "limits."))]
			if strings.HasPrefix(r.Resource, "requests.") {
				q = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(r.Resource, "requests."))]
			}
			div := int64(1)
			if !r.Divisor.IsZero() {
				div = r.Divisor.Value()
			}
			out[ev.Name] = strconv.FormatInt((q.Value()+div-1)/div, 10)
		default:
			return nil, fmt.Errorf("env %s: unsupported valueFrom %+v", ev.Name, ev.ValueFrom)
		}
	}
	return out, nil
}

// ControllerEnv is the environment a controller start gets: the Deployment's, with what must
// differ out of cluster overridden (free ports, the fake price API, the kubeconfig, the flavors
// file written from the bundle's ConfigMap), then overrides on top. A value "" in overrides
// unsets the variable.
func (e *Env) ControllerEnv(overrides map[string]string) (map[string]string, error) {
	env, err := e.Bundle.DeploymentEnv()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	env["METRICS_PORT"] = strconv.Itoa(ports[0])
	env["HEALTH_PROBE_PORT"] = strconv.Itoa(ports[1])
	env["KUBECONFIG"] = e.kubeconfig
	// In a pod, client-go reads the namespace from the ServiceAccount mount; out of cluster
	// the lease's namespace must be given. Leader election stays on, as the bundle ships it.
	env["LEADER_ELECTION_NAMESPACE"] = env["SYSTEM_NAMESPACE"]
	if _, ok := env["PRICING_API_URL"]; ok {
		env["PRICING_API_URL"] = e.PricesURL
	}
	if p, ok := env["FLAVORS_CONFIG_PATH"]; ok && p != "" {
		local, err := e.writeFlavorsFile(p)
		if err != nil {
			return nil, err
		}
		env["FLAVORS_CONFIG_PATH"] = local
	}
	for k, v := range overrides {
		if v == "" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	return env, nil
}

// writeFlavorsFile writes the ConfigMap key the Deployment mounts at path into the work folder.
func (e *Env) writeFlavorsFile(path string) (string, error) {
	key := filepath.Base(path)
	for _, cm := range e.Bundle.ConfigMaps() {
		if v, ok := cm.Data[key]; ok {
			local := filepath.Join(e.dir, "flavors-"+key)
			return local, os.WriteFile(local, []byte(v), 0o600)
		}
	}
	return "", fmt.Errorf("FLAVORS_CONFIG_PATH=%s but no bundle ConfigMap has key %q", path, key)
}

// StartController starts the controller with ControllerEnv(overrides) and waits for it to be
// healthy. A controller already running is stopped first.
func (e *Env) StartController(ctx context.Context, overrides map[string]string) error {
	if e.ctrl != nil {
		if err := e.ctrl.Stop(); err != nil {
			return err
		}
	}
	c, err := e.startHealthy(ctx, overrides)
	if c != nil {
		e.ctrl = c
	}
	return err
}

// startHealthy spawns the controller and waits for it to be healthy. A port handed out as free
// can be bound by another process (a test package beside this one) before the controller
// binds it; a start that ends on "address already in use" is retried on new ports, and only
// that: any other failure is the controller's and is returned as it is.
func (e *Env) startHealthy(ctx context.Context, overrides map[string]string) (*Controller, error) {
	const attempts = 3
	for i := 1; ; i++ {
		c, err := e.spawn(overrides)
		if err != nil {
			return nil, err
		}
		err = c.WaitHealthy(ctx, 90*time.Second)
		if err == nil || i == attempts || c.Running() || !c.logSays("address already in use") {
			return c, err
		}
		_ = c.Kill() // already exited; closes its log
	}
}

// logSays whether the controller's log holds s.
func (c *Controller) logSays(s string) bool {
	b, err := os.ReadFile(c.LogPath)
	return err == nil && strings.Contains(string(b), s)
}

// spawn starts a run of the controller binary with ControllerEnv(overrides).
func (e *Env) spawn(overrides map[string]string) (*Controller, error) {
	env, err := e.ControllerEnv(overrides)
	if err != nil {
		return nil, err
	}
	e.gen++
	c := &Controller{
		Env:        env,
		LogPath:    filepath.Join(e.dir, fmt.Sprintf("controller-%d.log", e.gen)),
		MetricsURL: "http://127.0.0.1:" + env["METRICS_PORT"] + "/metrics",
		HealthURL:  "http://127.0.0.1:" + env["HEALTH_PROBE_PORT"] + "/healthz",
		done:       make(chan struct{}),
		stopMark:   -1,
	}
	if c.logFile, err = os.Create(c.LogPath); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(e.binary)
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		c.cmd.Env = append(c.cmd.Env, k+"="+env[k])
	}
	c.cmd.Stdout, c.cmd.Stderr = c.logFile, c.logFile
	// Dies with the test process.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		_ = c.logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", e.binary, err)
	}
	go func() { c.waitErr = c.cmd.Wait(); c.exitedAt = time.Now(); close(c.done) }()
	return c, nil
}

// RestartController stops the controller gracefully and starts it again with new overrides.
func (e *Env) RestartController(ctx context.Context, overrides map[string]string) error {
	return e.StartController(ctx, overrides)
}

// WaitHealthy waits for /healthz and /metrics to answer 200. The manager starts its health
// probe and metrics servers apart: a loaded machine shows one up while the other is not, and a
// test reads metrics right after a restart.
func (c *Controller) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := answers(c.HealthURL)
		if err == nil {
			if err = answers(c.MetricsURL); err == nil {
				return nil
			}
		}
		select {
		case <-c.done:
			return fmt.Errorf("controller exited: %v; log tail:\n%s", c.waitErr, c.Tail(30))
		case <-ctx.Done():
			return fmt.Errorf("controller not healthy after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// answers says whether url answers 200.
func answers(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// Running says whether the process is alive.
func (c *Controller) Running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *Controller) Kill() error {
	c.killedByUs = true
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	_ = c.logFile.Close()
	return nil
}

// Stop sends SIGTERM, and SIGQUIT (a goroutine dump, then exit) after 30 s; a controller that
// died on its own, or did not exit 0 on SIGTERM, is an error.
func (c *Controller) Stop() error {
	var err error
	c.stopOnce.Do(func() {
		select {
		case <-c.done:
			if !c.killedByUs {
				err = fmt.Errorf("controller had exited on its own: %v; log tail:\n%s", c.waitErr, c.Tail(30))
			}
		default:
			c.stopMark = c.LineCount()
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.done:
				// SIGTERM is the rolling update's signal: the controller must stop cleanly
				// (and release its lease), not die of it.
				if c.waitErr != nil {
					err = fmt.Errorf("controller did not stop cleanly on SIGTERM: %v; log tail:\n%s", c.waitErr, c.Tail(30))
				}
			case <-time.After(30 * time.Second):
				// SIGQUIT makes the Go runtime write every goroutine's stack to the log before
				// exiting: what the stop was blocked on is the one thing worth keeping.
				_ = c.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-c.done:
				case <-time.After(10 * time.Second):
					_ = c.cmd.Process.Signal(syscall.SIGKILL)
					<-c.done
				}
				err = fmt.Errorf("controller did not stop within 30s of SIGTERM; its goroutines are dumped at the end of %s", c.LogPath)
			}
		}
		_ = c.logFile.Close()
	})
	return err
}

// LogLine is one line of the controller's log; JSON lines are decoded.
type LogLine struct {
	Raw     string
	Level   string
	Message string
	Fields  map[string]any
}

// Lines reads the whole log.
func (c *Controller) Lines() []LogLine {
	f, err := os.Open(c.LogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []LogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := LogLine{Raw: sc.Text()}
		if m := map[string]any{}; json.Unmarshal(sc.Bytes(), &m) == nil {
			l.Fields = m
			l.Level, _ = m["level"].(string)
			l.Message, _ = m["message"].(string)
			if l.Message == "" {
				l.Message, _ = m["msg"].(string)
			}
		} else if strings.HasPrefix(l.Raw, "panic:") || strings.HasPrefix(l.Raw, "fatal error:") {
			l.Level = "PANIC"
		}
		out = append(out, l)
	}
	return out
}

// LineCount is the number of lines logged so far, a mark for ErrorsSince.
func (c *Controller) LineCount() int { return len(c.Lines()) }

// ErrorsSince returns error (and panic) lines logged after line mark and before SIGTERM was
// sent: a clean stop cancels whatever is in flight (reconciles, lease renewals, informers still
// syncing) and controller-runtime and client-go log each at error level. What the stop itself
// must get right is checked by Stop: the process exits 0.
func (c *Controller) ErrorsSince(mark int) []LogLine {
	lines := c.Lines()
	if mark > len(lines) {
		mark = len(lines)
	}
	var out []LogLine
	for i, l := range lines[mark:] {
		if c.stopMark >= 0 && mark+i >= c.stopMark {
			break
		}
		switch strings.ToUpper(l.Level) {
		case "ERROR", "DPANIC", "PANIC", "FATAL":
			out = append(out, l)
		}
	}
	return out
}

// Tail returns the last n lines of the log.
func (c *Controller) Tail(n int) string {
	f, err := os.Open(c.LogPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Metrics scrapes /metrics.
func (c *Controller) Metrics() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(c.MetricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", c.MetricsURL, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Metric sums the samples of a metric family (counter, gauge, or a histogram's count) whose
// labels include every given label; a family not exposed yet sums to 0.
func (c *Controller) Metric(name string, labels map[string]string) (float64, error) {
	fams, err := c.Metrics()
	if err != nil {
		return 0, err
	}
	return Sum(fams, name, labels), nil
}

// Sum adds the samples of a family matching labels.
func Sum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

func matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Ports are drawn below Linux's default ephemeral range (32768–60999): the kernel hands ports
// in that range to every outbound connection and every ":0" listener, so a port picked there
// and released was seen taken by another test package's client before the controller bound it.
const (
	portLow  = 20000
	portHigh = 32768
)

// freePorts returns n distinct free ports below the ephemeral range: every listener is held
// until all are taken, so the same port cannot be handed out twice (it was, once, when ports
// came from ":0": the metrics and health ports were equal and the controller failed to start).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no free port in [%d, %d) after %d tries", portLow, portHigh, tries)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		defer l.Close()
		ports = append(ports, p)
	}
	return ports, nil
}

// ExitErr is how the process ended (nil while it runs, or after a clean exit).
func (c *Controller) ExitErr() error {
	select {
	case <-c.done:
		return c.waitErr
	default:
		return nil
	}
}
