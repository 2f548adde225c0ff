// Command demo tells the provider's story on the simulated CKE, in one terminal: it starts the
// simulated cluster, installs the rendered bundle and the general-purpose example, runs the
// controller under the bundle's ServiceAccount, deploys `inflate`, scales it up and down, and
// narrates what happens — pending pods, NodeClaims, NodeGroups with their flavors and prices,
// nodes, running pods, consolidation — then tears everything down.
//
//	go run ./sim/cmd/demo [--keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

const namespace = "demo"

func main() {
	keep := flag.Bool("keep", false, "keep the cluster and controller running at the end and print the kubeconfig path; Ctrl-C tears down")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	if err := run(*keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type story struct {
	env   *stack.Env
	start time.Time
	ctx   context.Context
	// what has been told already
	claims map[string]string
	groups map[string]string
	nodes  map[string]string
	pods   string
	events map[string]bool
	// launched is the flavor of every NodeGroup created, in order, for the closing summary.
	launched []string
}

func (s *story) say(format string, args ...any) {
	fmt.Printf("[%5s] %s\n", time.Since(s.start).Round(time.Second), fmt.Sprintf(format, args...))
}

func chapter(title string) { fmt.Printf("\n== %s\n", title) }

func run(keep bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	s := &story{start: time.Now(), ctx: ctx, claims: map[string]string{}, groups: map[string]string{}, nodes: map[string]string{}, events: map[string]bool{}}

	chapter("Setting the stage")
	dir, err := os.MkdirTemp("", "karpenter-demo-")
	if err != nil {
		return err
	}
	s.say("building the controller and, on a fresh machine, the pinned Kubernetes binaries (minutes the first time)")
	// The platform's measured timings: the story shows Creating, the node joining while the
	// group is still Creating, then Synced.
	opts := sim.LiveOptions()
	s.env, err = stack.Start(ctx, stack.Options{Sim: &opts, WorkDir: dir, Logf: func(f string, a ...any) { s.say(f, a...) }})
	if err != nil {
		return err
	}
	defer func() {
		chapter("Tearing down")
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping:", err)
		}
		if !keep {
			_ = os.RemoveAll(dir)
		}
		s.say("simulated CKE stopped, no process left behind")
	}()
	s.say("simulated CKE: 2 control-plane nodes (S), organisation quota 40 vCPU / 40 GB")
	s.say("bundle out/ applied; controller running as system:serviceaccount:karpenter:karpenter")
	if _, err := s.env.ApplyFile(ctx, "examples/general-purpose.yaml"); err != nil {
		return err
	}
	s.say("examples/general-purpose.yaml applied: CleverNodeClass \"default\", NodePool \"default\" (any flavor, consolidate after 30s)")
	ns := &corev1.Namespace{}
	ns.Name = namespace
	if err := s.env.Client.Create(ctx, ns); err != nil {
		return err
	}
	objs, err := stack.DecodeFile(filepath.Join(stack.ModuleRoot(), "examples", "inflate.yaml"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		o.SetNamespace(namespace)
	}
	if err := waitFor(ctx, time.Minute, func() bool {
		return s.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{}) == nil
	}); err != nil {
		return err
	}
	if err := s.env.Apply(ctx, objs...); err != nil {
		return err
	}
	s.say("examples/inflate.yaml applied in namespace %q: 1 CPU / 1Gi pause pods, 0 replicas", namespace)

	steps := []struct {
		title    string
		replicas int32
		done     func() bool
	}{
		{"Scale inflate to 3: one small node is enough", 3, s.settled(3)},
		{"Scale inflate to 8: Karpenter adds capacity, cheapest flavor that fits", 8, s.settled(8)},
		{"Scale inflate to 3: the emptied node is consolidated away", 3, s.settled(3)},
		{"Scale inflate to 0: scale to zero", 0, s.settled(0)},
	}
	var sum runSummary
	from := int32(0)
	for _, st := range steps {
		chapter(st.title)
		rec := stepRecord{From: from, To: st.replicas}
		scaled := time.Now()
		if err := s.scale(st.replicas); err != nil {
			return err
		}
		err := s.watch(6*time.Minute, func() bool {
			if rec.Running == 0 && st.replicas > from && s.allRunning(int(st.replicas)) {
				rec.Running = time.Since(scaled)
			}
			return st.done()
		})
		if err != nil {
			return err
		}
		rec.Settled = time.Since(scaled)
		rec.Fleet, rec.CostHourly = s.summary()
		sum.Steps = append(sum.Steps, rec)
		from = st.replicas
	}
	sum.Launched, sum.Wall = s.launched, time.Since(s.start)
	chapter("Summary")
	sum.render(os.Stdout)
	if keep {
		chapter("Your turn")
		fmt.Printf("The cluster and the controller keep running. In another terminal:\n\n")
		fmt.Printf("  export KUBECONFIG=%s\n", s.env.Cluster.KubeconfigPath())
		fmt.Printf("  kubectl -n %s scale deployment inflate --replicas 5\n", namespace)
		fmt.Printf("  kubectl get nodeclaims,nodegroups,nodes\n\n")
		fmt.Printf("Controller log: %s\nPress Ctrl-C to tear everything down.\n", s.env.Controller().LogPath)
		<-ctx.Done()
		ctx = context.Background()
		s.ctx = ctx
	}
	return nil
}

func waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	return stack.Poll(ctx, timeout, func() error {
		if ok() {
			return nil
		}
		return fmt.Errorf("not yet")
	})
}

func (s *story) scale(n int32) error {
	d := &appsv1.Deployment{}
	if err := s.env.Client.Get(s.ctx, client.ObjectKey{Namespace: namespace, Name: "inflate"}, d); err != nil {
		return err
	}
	d.Spec.Replicas = ptr.To(n)
	if err := s.env.Client.Update(s.ctx, d); err != nil {
		return err
	}
	s.say("kubectl scale deployment inflate --replicas %d", n)
	return nil
}

// settled: n pods Running, nothing pending, no claim, group or node in transit, and the node
// count minimal (no empty Karpenter node left).
func (s *story) settled(n int) func() bool {
	return func() bool {
		pods := &corev1.PodList{}
		if s.env.Client.List(s.ctx, pods, client.InNamespace(namespace)) != nil || len(pods.Items) != n {
			return false
		}
		used := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
			used[p.Spec.NodeName] = true
		}
		groups, err := s.env.NodeGroups(s.ctx)
		if err != nil {
			return false
		}
		claims, err := s.env.NodeClaims(s.ctx, "")
		if err != nil || len(claims) != len(groups) {
			return false
		}
		for _, g := range groups {
			if g.DeletionTimestamp != nil || !used[ngv1.NodeName(g.Name, 0)] {
				return false
			}
		}
		return true
	}
}

// watch narrates changes until done or timeout.
func (s *story) watch(timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s.narrate()
		if done() {
			s.narrate()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not settle within %s (controller log: %s)", timeout, s.env.Controller().LogPath)
		}
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *story) price(flavor string) string {
	v, err := s.env.Controller().Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": flavor})
	if err != nil || v == 0 {
		return "price unknown"
	}
	return fmt.Sprintf("%.4f EUR/h", v)
}

func (s *story) narrate() {
	ctx, cl := s.ctx, s.env.Client
	// Pods
	pods := &corev1.PodList{}
	if cl.List(ctx, pods, client.InNamespace(namespace)) == nil {
		count := map[string]int{}
		for _, p := range pods.Items {
			phase := string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			count[phase]++
		}
		var parts []string
		for _, ph := range []string{"Pending", "Running", "Terminating"} {
			if count[ph] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", count[ph], ph))
			}
		}
		line := strings.Join(parts, ", ")
		if line == "" {
			line = "none"
		}
		if line != s.pods {
			s.pods = line
			s.say("pods: %s", line)
		}
	}
	// NodeClaims
	if claims, err := s.env.NodeClaims(ctx, ""); err == nil {
		seen := map[string]bool{}
		for _, nc := range claims {
			seen[nc.Name] = true
			state := "created"
			switch {
			case nc.DeletionTimestamp != nil:
				state = "deleting"
			case nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue():
				state = "initialized"
			case nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue():
				state = "registered"
			case nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue():
				state = "launched"
			}
			if s.claims[nc.Name] == state {
				continue
			}
			s.claims[nc.Name] = state
			switch state {
			case "created":
				s.say("NodeClaim %s created by Karpenter (%s CPU, %s requested)", nc.Name, nc.Spec.Resources.Requests.Cpu(), nc.Spec.Resources.Requests.Memory())
			case "deleting":
				s.say("NodeClaim %s is being deleted", nc.Name)
			}
		}
		for name := range s.claims {
			if !seen[name] {
				delete(s.claims, name)
				s.say("NodeClaim %s gone", name)
			}
		}
	}
	// NodeGroups
	if groups, err := s.env.NodeGroups(ctx); err == nil {
		seen := map[string]bool{}
		for _, g := range groups {
			seen[g.Name] = true
			state := "created"
			switch {
			case g.DeletionTimestamp != nil:
				state = "deleting"
			case g.Status.Phase != "":
				state = g.Status.Phase
			}
			if s.groups[g.Name] == state {
				continue
			}
			s.groups[g.Name] = state
			switch state {
			case "created":
				desc := g.Spec.Flavor
				if f, ok := cke.LookupFlavor(g.Spec.Flavor); ok {
					desc = fmt.Sprintf("%s (%d vCPU, %d GB)", f.Name, f.CPU, f.NominalGB)
				}
				s.say("NodeGroup %s created: flavor %s at %s", g.Name, desc, s.price(g.Spec.Flavor))
				s.launched = append(s.launched, g.Spec.Flavor)
			case "Creating":
				s.say("NodeGroup %s accepted by the node-group operator: Creating", g.Name)
			case "Synced":
				s.say("NodeGroup %s Synced (Ready)", g.Name)
			case "deleting":
				s.say("NodeGroup %s deleted, the VM is being torn down", g.Name)
			default:
				s.say("NodeGroup %s: %s", g.Name, state)
			}
		}
		for name := range s.groups {
			if !seen[name] {
				delete(s.groups, name)
				s.say("NodeGroup %s gone", name)
			}
		}
	}
	// Nodes (workers only)
	nodes := &corev1.NodeList{}
	if cl.List(ctx, nodes, client.MatchingLabels{"clever-cloud.com/cluster-node-role": "worker"}) == nil {
		seen := map[string]bool{}
		for _, n := range nodes.Items {
			seen[n.Name] = true
			state := "joined"
			switch {
			case n.DeletionTimestamp != nil:
				state = "draining"
			case n.Spec.ProviderID != "" && n.Labels[karpv1.NodeRegisteredLabelKey] == "true" && sim.NodeReady(&n):
				state = "registered"
			}
			if s.nodes[n.Name] == state {
				continue
			}
			s.nodes[n.Name] = state
			switch state {
			case "joined":
				s.say("Node %s joined the cluster (%s)", n.Name, n.Labels[corev1.LabelInstanceTypeStable])
			case "registered":
				s.say("Node %s Ready, provider ID %s, registered by Karpenter", n.Name, n.Spec.ProviderID)
			case "draining":
				s.say("Node %s is draining", n.Name)
			}
		}
		for name := range s.nodes {
			if !seen[name] {
				delete(s.nodes, name)
				s.say("Node %s removed", name)
			}
		}
	}
	// Karpenter's disruption decisions
	if evs, err := s.env.Events(ctx, ""); err == nil {
		for _, ev := range evs {
			if ev.InvolvedObject.Kind != "NodeClaim" || !strings.HasPrefix(ev.Reason, "Disruption") || ev.Reason == "DisruptionBlocked" {
				continue
			}
			key := ev.InvolvedObject.Name + ev.Reason
			if s.events[key] {
				continue
			}
			s.events[key] = true
			s.say("Karpenter: %s %s — %s", ev.Reason, ev.InvolvedObject.Name, ev.Message)
		}
	}
}

// summary prints and returns the settled fleet's flavors and what they cost per hour.
func (s *story) summary() ([]string, float64) {
	groups, err := s.env.NodeGroups(s.ctx)
	if err != nil {
		return nil, 0
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	total := 0.0
	var fleet []string
	for _, g := range groups {
		v, _ := s.env.Controller().Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": g.Spec.Flavor})
		total += v
		fleet = append(fleet, g.Spec.Flavor)
	}
	parts := fleet
	if len(parts) == 0 {
		parts = []string{"no worker node"}
	}
	fmt.Printf("   → settled: %s; Karpenter nodes cost %.4f EUR/h\n", strings.Join(parts, " + "), total)
	return fleet, total
}

// allRunning: exactly n pods, all Running and none terminating.
func (s *story) allRunning(n int) bool {
	pods := &corev1.PodList{}
	if s.env.Client.List(s.ctx, pods, client.InNamespace(namespace)) != nil || len(pods.Items) != n {
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

// stepRecord is what one scaling step took and left, for the closing summary.
type stepRecord struct {
	From, To int32
	// Running: from the scale command until every replica was Running (scale-ups only);
	// Settled: until the fleet settled (no surplus node, nothing in transit).
	Running, Settled time.Duration
	// Fleet: the flavors of Karpenter's NodeGroups once settled; CostHourly what they cost.
	Fleet      []string
	CostHourly float64
}

// runSummary is the story in one screen: what was launched, how long pods waited, what the
// fleet cost at each step.
type runSummary struct {
	Steps []stepRecord
	// Launched: the flavor of every NodeGroup created, in order.
	Launched []string
	Wall     time.Duration
}

// render writes the summary as a few aligned lines.
func (r runSummary) render(w io.Writer) {
	var order []string
	count := map[string]int{}
	for _, f := range r.Launched {
		if count[f] == 0 {
			order = append(order, f)
		}
		count[f]++
	}
	launched := make([]string, len(order))
	for i, f := range order {
		launched[i] = fmt.Sprintf("%s ×%d", f, count[f])
	}
	if len(launched) == 0 {
		launched = []string{"none"}
	}
	fmt.Fprintf(w, "flavors launched: %s (%d NodeGroups)\n\n", strings.Join(launched, ", "), len(r.Launched))
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	// The fleet, last, is text after the last cell: left-aligned, whatever its length.
	fmt.Fprintf(tw, "pods\tall Running after\tsettled after\tEUR/h\t  fleet\n")
	peak, peakFleet := 0.0, "no worker node"
	for _, st := range r.Steps {
		running := "–"
		if st.To > st.From {
			running = seconds(st.Running)
		}
		fleet := "no worker node"
		if len(st.Fleet) > 0 {
			fleet = strings.Join(st.Fleet, " + ")
		}
		if st.CostHourly > peak {
			peak, peakFleet = st.CostHourly, fleet
		}
		fmt.Fprintf(tw, "%d → %d\t%s\t%s\t%.4f\t  %s\n", st.From, st.To, running, seconds(st.Settled), st.CostHourly, fleet)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\npeak cost %.4f EUR/h (%s); whole story %s\n", peak, peakFleet, r.Wall.Round(time.Second))
}

func seconds(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
