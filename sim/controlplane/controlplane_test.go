package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// Stop must leave no process behind: every component, etcd and the apiserver included.
func TestStopLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: skipped with -short")
	}
	// No BinDir: Start finds the binaries itself (building them if KUBEBUILDER_ASSETS is unset).
	cp, err := Start(context.Background(), Options{Audit: true})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	markers := []string{cp.Dir(), cp.env.ControlPlane.APIServer.CertDir, cp.env.ControlPlane.Etcd.DataDir}
	pids := processesMentioning(t, markers)
	if len(pids) < 5 {
		t.Errorf("found %d processes of the control plane, want etcd, apiserver, scheduler, controller-manager, kwok: %v", len(pids), pids)
	}
	if _, err := os.Stat(cp.KubeconfigPath()); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}
	dir := cp.Dir()
	if err := cp.Stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	gomega.NewWithT(t).Eventually(func() map[string]string { return processesMentioning(t, markers) }).
		WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).Should(gomega.BeEmpty(), "processes left after Stop")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work folder %s not removed: %v", dir, err)
	}
}

func processesMentioning(t *testing.T, markers []string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	out := map[string]string{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(string(raw), "\x00", " ")
		for _, m := range markers {
			if m != "" && strings.Contains(cmd, m) {
				out[e.Name()] = filepath.Base(strings.Fields(cmd)[0])
				break
			}
		}
	}
	return out
}
