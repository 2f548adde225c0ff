package conformance

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// The performance suite finds Karpenter the way it runs in a cluster: the holder of the Lease
// kube-system/karpenter-leader-election names a Pod in kube-system, whose /metrics on port 8080
// it scrapes through the apiserver's pod proxy every 5 s (heap and CPU, the figures it gates on)
// and through a port-forward (the pods-drained counter and pprof). The harness runs the
// controller out of cluster, so it stands in for the Pod: a Pod object on a Node of its own whose
// address is this machine's, a relay from that address's port 8080 to the controller's metrics
// port, and the kubelet's port-forward endpoint for that Node. What the suite reads is the real
// controller process's metrics; only the way to them is simulated.
const (
	// KarpenterPodNamespace and KarpenterLeaseName are where the suite looks.
	KarpenterPodNamespace = "kube-system"
	KarpenterLeaseName    = "karpenter-leader-election"
	// KarpenterPodName is the stand-in Pod, KarpenterNodeName its Node.
	KarpenterPodName  = "karpenter-controller"
	KarpenterNodeName = "karpenter-system"
	// KarpenterMetricsPort is the port the suite scrapes, fixed in its code.
	KarpenterMetricsPort = 8080
)

// karpenterPod is the stand-in: the objects it created and the servers it runs.
type karpenterPod struct {
	env     *stack.Env
	port    int
	relay   net.Listener
	kubelet *http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	logf    func(format string, args ...any)
	// restartEnv is the controller's environment overrides, for a restart after it exits.
	restartEnv map[string]string
	restarts   int32
}

// startKarpenterPod creates the stand-in on env's cluster. The Node is tainted (the suites
// expect every pre-existing node to be a tainted system node), carries no NodePool label (the
// suite's utilisation figures skip it) and no kwok annotation (no fake kubelet touches it: the
// harness renews its Lease, so it stays Ready).
// port is the Pod's metrics port: KarpenterMetricsPort for the suite; a test of the stand-in
// takes a free one, so that two runs on one machine do not collide.
func startKarpenterPod(ctx context.Context, env *stack.Env, port int, restartEnv map[string]string, logf func(string, ...any)) (_ *karpenterPod, retErr error) {
	ip, err := hostIPv4()
	if err != nil {
		return nil, err
	}
	k := &karpenterPod{env: env, port: port, logf: logf, restartEnv: restartEnv}
	defer func() {
		if retErr != nil {
			k.Stop()
		}
	}()
	// The apiserver refuses to proxy to a loopback pod IP, so the Pod has this machine's
	// address, and the suite's fixed port is relayed there to the controller's own.
	if k.relay, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err != nil {
		return nil, fmt.Errorf("listening on %s:%d for the performance suite's metrics scrapes (is another run holding the port?): %w", ip, port, err)
	}
	go k.serveRelay()
	kubeletLn, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening for the stand-in kubelet: %w", err)
	}
	cert, err := selfSignedCert(ip)
	if err != nil {
		_ = kubeletLn.Close()
		return nil, err
	}
	k.kubelet = &http.Server{
		Handler:           http.HandlerFunc(k.serveKubelet),
		ReadHeaderTimeout: 10 * time.Second,
		// Port-forward is an HTTP/1.1 upgrade; no HTTP/2.
		TLSConfig:    &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() { _ = k.kubelet.ServeTLS(kubeletLn, "", "") }()
	kubeletPort := kubeletLn.Addr().(*net.TCPAddr).Port

	if err := k.createObjects(ctx, ip, port, kubeletPort); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.wg.Add(2)
	go func() {
		defer k.wg.Done()
		k.renew(rctx)
	}()
	go func() {
		defer k.wg.Done()
		k.restartOnExit(rctx)
	}()
	logf("stand-in karpenter Pod %s/%s on Node %s (%s): metrics relayed from :%d, kubelet on :%d",
		KarpenterPodNamespace, KarpenterPodName, KarpenterNodeName, ip, port, kubeletPort)
	return k, nil
}

// Stop stops the servers and the renewals; the objects go with the cluster.
func (k *karpenterPod) Stop() {
	if k.cancel != nil {
		k.cancel()
		k.wg.Wait()
	}
	if k.relay != nil {
		_ = k.relay.Close()
	}
	if k.kubelet != nil {
		_ = k.kubelet.Close()
	}
}

// metricsAddr is the running controller's metrics address (a restart picks a new port).
func (k *karpenterPod) metricsAddr() (string, error) {
	c := k.env.Controller()
	if c == nil {
		return "", errors.New("no controller running")
	}
	u, err := url.Parse(c.MetricsURL)
	if err != nil {
		return "", fmt.Errorf("parsing the controller's metrics URL %q: %w", c.MetricsURL, err)
	}
	return u.Host, nil
}

func (k *karpenterPod) serveRelay() {
	for {
		conn, err := k.relay.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			addr, err := k.metricsAddr()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			pipe(conn, up)
		}()
	}
}

// pipe copies both ways until either side is done.
func pipe(a, b io.ReadWriter) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
}

// serveKubelet is the kubelet's port-forward endpoint (POST /portForward/<namespace>/<pod>,
// protocol portforward.k8s.io over SPDY) for the stand-in Pod's port 8080; everything else is
// 404, as from a kubelet that runs no such container.
func (k *karpenterPod) serveKubelet(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/portForward/"+KarpenterPodNamespace+"/"+KarpenterPodName {
		http.NotFound(w, r)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{"portforward.k8s.io"}); err != nil {
		return
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(10 * time.Minute)
	// Each forwarded connection is a pair of streams sharing a requestID: "error" (closed
	// empty on success) and "data".
	pending := map[string]httpstream.Stream{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streams:
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			if s.Headers().Get(corev1.StreamType) == corev1.StreamTypeError {
				pending[id] = s
				continue
			}
			errStream := pending[id]
			delete(pending, id)
			go k.forward(conn, s, errStream)
		}
	}
}

func (k *karpenterPod) forward(conn httpstream.Connection, data, errStream httpstream.Stream) {
	defer conn.RemoveStreams(data)
	defer data.Close()
	fail := func(err error) {
		if errStream != nil {
			_, _ = errStream.Write([]byte(err.Error()))
		}
	}
	if errStream != nil {
		defer conn.RemoveStreams(errStream)
		defer errStream.Close()
	}
	if p := data.Headers().Get(corev1.PortHeader); p != strconv.Itoa(k.port) {
		fail(fmt.Errorf("port %s is not forwarded: the stand-in serves only %d", p, k.port))
		return
	}
	addr, err := k.metricsAddr()
	if err != nil {
		fail(err)
		return
	}
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fail(fmt.Errorf("dialing the controller's metrics at %s: %w", addr, err))
		return
	}
	defer up.Close()
	pipe(data, up)
}

func (k *karpenterPod) createObjects(ctx context.Context, ip string, port, kubeletPort int) error {
	c := k.env.Client
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: KarpenterNodeName, Labels: map[string]string{
			corev1.LabelHostname: KarpenterNodeName, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("creating the stand-in karpenter Node: %w", err)
	}
	// Status by merge patch: the node lifecycle controller writes the new Node at once.
	nodeBase := node.DeepCopy()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	node.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the harness's stand-in for the node the karpenter Pod runs on", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(kubeletPort)}},
	}
	if err := c.Status().Patch(ctx, node, client.MergeFrom(nodeBase)); err != nil {
		return fmt.Errorf("writing the stand-in karpenter Node's status: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: KarpenterPodName, Namespace: KarpenterPodNamespace},
		Spec: corev1.PodSpec{
			NodeName: KarpenterNodeName, HostNetwork: true,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "controller", Image: "karpenter-clevercloud:out-of-cluster",
				Ports: []corev1.ContainerPort{{Name: "http-metrics", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
			}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating the stand-in karpenter Pod: %w", err)
	}
	podBase := pod.DeepCopy()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: ip, PodIP: ip,
		HostIPs: []corev1.HostIP{{IP: ip}}, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "controller", Image: "karpenter-clevercloud:out-of-cluster", Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if err := c.Status().Patch(ctx, pod, client.MergeFrom(podBase)); err != nil {
		return fmt.Errorf("writing the stand-in karpenter Pod's status: %w", err)
	}
	// The holder identity is "<pod>_<id>", as controller-runtime writes it from a Pod's
	// hostname; the controller's own lease (in its namespace) is untouched.
	for _, l := range []*coordinationv1.Lease{
		lease(KarpenterPodNamespace, KarpenterLeaseName, KarpenterPodName+"_out-of-cluster", 15),
		lease(corev1.NamespaceNodeLease, KarpenterNodeName, KarpenterNodeName, 40),
	} {
		if err := c.Create(ctx, l); err != nil {
			return fmt.Errorf("creating Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	}
	return nil
}

func lease(ns, name, holder string, seconds int32) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now,
		},
	}
}

// renew keeps both Leases fresh, as the controller and a kubelet would: the Node stays Ready
// for the kube-controller-manager, the suite sees a live leader.
func (k *karpenterPod) renew(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, key := range []client.ObjectKey{
			{Namespace: KarpenterPodNamespace, Name: KarpenterLeaseName},
			{Namespace: corev1.NamespaceNodeLease, Name: KarpenterNodeName},
		} {
			l := &coordinationv1.Lease{}
			err := k.env.Client.Get(ctx, key, l)
			if err == nil {
				now := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &now
				err = k.env.Client.Update(ctx, l)
			}
			if err != nil && ctx.Err() == nil {
				k.logf("renewing Lease %s: %v", key, err)
			}
		}
	}
}

// restartOnExit starts the controller again when it exits, as the kubelet restarts a Pod's
// container (a controller that loses its leader Lease exits), and counts the restart in the
// stand-in Pod's status, where the suite's ExpectNoCrashes reads it: a crash still fails the
// spec, and the phases after it still measure.
func (k *karpenterPod) restartOnExit(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c := k.env.Controller(); c == nil || c.Running() {
			continue
		}
		k.restarts++
		k.logf("the controller exited (log %s); starting it again, restart %d; tail:\n%s", k.env.Controller().LogPath, k.restarts, k.env.Controller().Tail(5))
		if err := k.env.StartController(ctx, k.restartEnv); err != nil && ctx.Err() == nil {
			k.logf("restarting the controller: %v", err)
			continue
		}
		pod := &corev1.Pod{}
		err := k.env.Client.Get(ctx, client.ObjectKey{Namespace: KarpenterPodNamespace, Name: KarpenterPodName}, pod)
		if err == nil && len(pod.Status.ContainerStatuses) > 0 {
			base := pod.DeepCopy()
			pod.Status.ContainerStatuses[0].RestartCount = k.restarts
			err = k.env.Client.Status().Patch(ctx, pod, client.MergeFrom(base))
		}
		if err != nil && ctx.Err() == nil {
			k.logf("counting the restart in the stand-in Pod: %v", err)
		}
	}
}

// hostIPv4 is this machine's first IPv4 address that is neither loopback nor link-local: the
// apiserver proxies to no other.
func hostIPv4() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing this machine's addresses: %w", err)
	}
	var seen []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		seen = append(seen, n.IP.String())
		if ip4 := n.IP.To4(); ip4 != nil && !ip4.IsLoopback() && !ip4.IsLinkLocalUnicast() {
			return ip4.String(), nil
		}
	}
	return "", fmt.Errorf("the performance suite scrapes Karpenter through the apiserver's pod proxy, which refuses loopback and link-local pod IPs; this machine has no other IPv4 address (%s)", strings.Join(seen, ", "))
}

// selfSignedCert is the stand-in kubelet's serving certificate. The apiserver checks a
// kubelet's certificate only when given --kubelet-certificate-authority, which the simulated
// CKE does not set.
func selfSignedCert(ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the stand-in kubelet's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: KarpenterNodeName},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing the stand-in kubelet's certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// PortFree returns an error naming port when something on this machine already listens on it.
// Core's suites bind KarpenterMetricsPort themselves: the chaos specs start a manager with
// controller-runtime's default metrics address, and the performance suite's stand-in Pod relays
// it. Two runs side by side (make conformance beside make performance) would otherwise fail
// minutes in, on a panic in core's test code that does not say why.
func PortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d is taken (%w): core's regression and performance suites need it; is another make conformance or make performance running?", port, err)
	}
	return l.Close()
}
