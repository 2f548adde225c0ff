package leadership

import (
	"os"
	"path/filepath"
	"testing"
)

// The Lease is core's: its name option, in the namespace option, else SYSTEM_NAMESPACE, else
// the pod's own namespace; with none of them there is no Lease to elect on.
func TestLeaseNamespace(t *testing.T) {
	dir := t.TempDir()
	pod := filepath.Join(dir, "namespace")
	if err := os.WriteFile(pod, []byte("from-pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		option, system, podPath, want string
	}{
		{"option", "system", pod, "option"},
		{"", "system", pod, "system"},
		{"", "", pod, "from-pod"},
		{"", "", missing, ""},
	} {
		l, err := leaseIn("karpenter-leader-election", tc.option, tc.system, tc.podPath)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%+v: elected on %+v with no namespace given", tc, l)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		if l != (Lease{Namespace: tc.want, Name: "karpenter-leader-election"}) {
			t.Errorf("%+v: Lease %+v, want %s/karpenter-leader-election", tc, l, tc.want)
		}
	}
	if _, err := leaseIn("", "option", "", pod); err == nil {
		t.Error("a Lease without a name")
	}
}
