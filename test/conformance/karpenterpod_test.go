package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// TestKarpenterPodStandIn reaches the controller's metrics the two ways the performance suite
// does, through the stand-in: the apiserver's pod proxy to the Lease holder's Pod's metrics port,
// and a port-forward to that Pod through its Node's kubelet. Each must give the controller's
// own process metrics, with the three the suite gates on.
func TestKarpenterPodStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated CKE: skipped with -short")
	}
	ip, err := hostIPv4()
	if err != nil {
		// The performance suite cannot run here either; it says why when it starts.
		t.Skip(err)
	}
	// A free port, not the suite's 8080: two runs of make test may share the machine.
	pl, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	metricsPort := pl.Addr().(*net.TCPAddr).Port
	pl.Close()
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	so := SimOptions()
	env, err := stack.Start(ctx, stack.Options{Sim: &so, WorkDir: t.TempDir(), Logf: t.Logf, Env: map[string]string{"FEATURE_GATES": FeatureGates}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	kp, err := startKarpenterPod(ctx, env, metricsPort, map[string]string{"FEATURE_GATES": FeatureGates}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer kp.Stop()

	// As the suite's FindActiveKarpenterPod: the Lease names the Pod.
	l, err := env.Kube.CoordinationV1().Leases(KarpenterPodNamespace).Get(ctx, KarpenterLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := strings.Split(*l.Spec.HolderIdentity, "_")[0]

	// As KarpenterMetricsPoller: the apiserver's pod proxy.
	data, err := env.Kube.CoreV1().Pods(KarpenterPodNamespace).ProxyGet("http", pod, fmt.Sprint(metricsPort), "/metrics", nil).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod proxy to %s:%d/metrics: %v", pod, metricsPort, err)
	}
	checkProcessMetrics(t, "pod proxy", data)

	// As ExpectPodMetrics and the profiler: a port-forward through the kubelet.
	rt, upgrader, err := spdy.RoundTripperFor(env.Cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	u := env.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(KarpenterPodNamespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	port, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.New(dialer, []string{fmt.Sprintf("%d:%d", port, metricsPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward: %v", err)
	case <-ctx.Done():
		t.Fatal("port-forward never ready")
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatalf("GET through the port-forward: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkProcessMetrics(t, "port-forward", body)
}

func checkProcessMetrics(t *testing.T, via string, data []byte) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: parsing metrics: %v", via, err)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_gc_heap_live_bytes", "process_cpu_seconds_total"} {
		if f, ok := families[name]; !ok || len(f.GetMetric()) == 0 {
			t.Errorf("%s: no %s: the suite's poller would collect no sample", via, name)
		}
	}
	if _, ok := families["karpenter_nodeclaims_created_total"]; !ok && !strings.Contains(string(data), "karpenter_") {
		t.Errorf("%s: no karpenter_ metric: not the controller's endpoint", via)
	}
}

func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func TestPortFreeNamesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	err = PortFree(port)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("PortFree(%d) with the port held = %v, want an error naming the port", port, err)
	}
	l.Close()
	if err := PortFree(port); err != nil {
		t.Fatalf("PortFree(%d) once released = %v", port, err)
	}
}
