package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var api *testenv.Env

// TestMain starts a real apiserver: a recording is about what the apiserver's watches do.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		e, err := testenv.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting the apiserver:", err)
			return 1
		}
		defer func() { _ = e.Stop() }()
		api = e
		return m.Run()
	}())
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"recording": "test"}}}
}

// A recording reports what came after its list, in order, and marks what the list held.
func TestRecordingHandsOnEventsAfterItsList(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	before := configMap("recorded-before")
	g.Expect(api.Client.Create(ctx, before)).To(gomega.Succeed())
	events := make(chan Event, 16)
	existing, rec, err := Record(ctx, api.Client, &corev1.ConfigMapList{}, func(ev Event) { events <- ev }, client.InNamespace("default"), client.MatchingLabels{"recording": "test"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(existing).To(gomega.HaveLen(1))
	after := configMap("recorded-after")
	g.Expect(api.Client.Create(ctx, after)).To(gomega.Succeed())
	g.Expect(api.Client.Delete(ctx, before)).To(gomega.Succeed())
	var got []string
	g.Eventually(func() []string {
		select {
		case ev := <-events:
			got = append(got, string(ev.Type)+" "+ev.Object.GetName()+map[bool]string{true: " listed", false: ""}[ev.Listed])
		default:
		}
		return got
	}).WithTimeout(10 * time.Second).Should(gomega.Equal([]string{
		string(watch.Added) + " recorded-after",
		string(watch.Deleted) + " recorded-before listed",
	}))
	g.Expect(rec.Stop()).To(gomega.Succeed(), "a recording stopped while its watch runs ends cleanly")
}

// A watch the apiserver ends before the recording is stopped is an error: what came next
// went unseen.
func TestRecordingReportsAWatchThatEndsEarly(t *testing.T) {
	g := gomega.NewWithT(t)
	// The apiserver closes this watch after a second, as it closes any watch at its timeout.
	short := &client.ListOptions{Raw: &metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)}}
	_, rec, err := Record(context.Background(), api.Client, &corev1.ConfigMapList{}, func(Event) {}, client.InNamespace("default"), short)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(rec.Err).WithTimeout(15 * time.Second).Should(gomega.MatchError(gomega.ContainSubstring("ended before the recording was stopped")))
	g.Expect(rec.Stop()).To(gomega.MatchError(gomega.ContainSubstring("ended before")))
}

// A resuming recording keeps following its objects across watches the apiserver ends, and
// counts the gaps instead of failing.
func TestResumingRecordingFollowsAcrossEndedWatches(t *testing.T) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	short := &client.ListOptions{Raw: &metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)}}
	sel := client.MatchingLabels{"recording": "resuming"}
	var mu sync.Mutex
	// Every event per object, in order: with one-second watches, an object may first be seen
	// by a watch (ADDED) or by the re-list after a gap (MODIFIED, Resumed), and every later gap
	// lists it again.
	seen := map[string][]string{}
	_, rec, err := RecordResuming(ctx, api.Client, &corev1.ConfigMapList{}, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.Object.GetName()] = append(seen[ev.Object.GetName()], string(ev.Type))
	}, client.InNamespace("default"), sel, short)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	first := configMap("resumed-first")
	first.Labels = sel
	g.Expect(api.Client.Create(ctx, first)).To(gomega.Succeed())
	g.Eventually(rec.Gaps).WithTimeout(15*time.Second).Should(gomega.BeNumerically(">=", 1), "the apiserver ended the first watch")
	second := configMap("resumed-second")
	second.Labels = sel
	g.Expect(api.Client.Create(ctx, second)).To(gomega.Succeed())
	t.Cleanup(func() { _ = api.Client.Delete(ctx, second) })
	g.Expect(api.Client.Delete(ctx, first)).To(gomega.Succeed())
	events := func(name string) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(seen[name])
		}
	}
	g.Eventually(events("resumed-second")).WithTimeout(15*time.Second).Should(gomega.ContainElement(gomega.BeElementOf(string(watch.Added), string(watch.Modified))),
		"an object created after a gap is seen")
	g.Eventually(func() string {
		e := events("resumed-first")()
		if len(e) == 0 {
			return ""
		}
		return e[len(e)-1]
	}).WithTimeout(15*time.Second).Should(gomega.Equal(string(watch.Deleted)), "a deletion is reported, by the watch or by the re-list after a gap")
	n := len(events("resumed-first")())
	g.Consistently(events("resumed-first")).WithTimeout(2*time.Second).Should(gomega.HaveLen(n), "nothing follows the deletion")
	g.Expect(rec.Err()).To(gomega.Succeed(), "a resuming recording has no error for an ended watch")
	g.Expect(rec.Stop()).To(gomega.Succeed())
}
