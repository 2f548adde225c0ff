package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// fakeControllerEnv makes the test binary act as the controller: it fails to bind the way the
// manager does while the file FAKE_BIND_FAILURES counts down, then serves 200 on both ports
// until it is signalled.
const fakeControllerEnv = "STACK_TEST_FAKE_CONTROLLER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeControllerEnv) != "" {
		os.Exit(fakeController())
	}
	os.Exit(m.Run())
}

func fakeController() int {
	path := os.Getenv("FAKE_BIND_FAILURES")
	b, _ := os.ReadFile(path)
	if left, _ := strconv.Atoi(strings.TrimSpace(string(b))); left > 0 {
		_ = os.WriteFile(path, []byte(strconv.Itoa(left-1)), 0o600)
		fmt.Printf("problem running manager: listen tcp :%s: bind: %s\n", os.Getenv("HEALTH_PROBE_PORT"), os.Getenv("FAKE_FAILURE"))
		return 1
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	for _, p := range []string{os.Getenv("METRICS_PORT"), os.Getenv("HEALTH_PROBE_PORT")} {
		l, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		go func() { _ = http.Serve(l, ok) }()
	}
	select {}
}

func fakeEnv(t *testing.T, failures int, failure string) (*Env, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	count := filepath.Join(dir, "failures")
	if err := os.WriteFile(count, []byte(strconv.Itoa(failures)), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "controller"}}
	e := &Env{Bundle: &Bundle{Deployment: dep}, dir: dir, binary: self}
	return e, map[string]string{fakeControllerEnv: "1", "FAKE_BIND_FAILURES": count, "FAKE_FAILURE": failure}
}

// A start lost to a port another process took is retried on new ports, three starts at most;
// any other failure is the controller's and is not retried.
func TestStartRetriesOnlyPortsTakenBeforeTheControllerBoundThem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		failure  string
		healthy  bool
		spawns   int
	}{
		{name: "two bind failures, then healthy", failures: 2, failure: "address already in use", healthy: true, spawns: 3},
		{name: "three bind failures: the third is returned", failures: 3, failure: "address already in use", spawns: 3},
		{name: "another failure is not retried", failures: 1, failure: "permission denied", spawns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, overrides := fakeEnv(t, tc.failures, tc.failure)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := e.StartController(ctx, overrides)
			if e.ctrl != nil {
				defer e.ctrl.Kill()
			}
			switch {
			case tc.healthy && err != nil:
				t.Fatalf("start: %v", err)
			case !tc.healthy && (err == nil || !strings.Contains(err.Error(), tc.failure)):
				t.Fatalf("start = %v, want the controller's failure %q", err, tc.failure)
			}
			if e.gen != tc.spawns {
				t.Errorf("spawned %d times, want %d", e.gen, tc.spawns)
			}
		})
	}
}

func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < portLow || p >= portHigh {
			t.Errorf("port %d outside [%d, %d)", p, portLow, portHigh)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
