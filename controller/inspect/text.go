package inspect

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteStatus writes the status report for people: one section a subject, each line a fact.
func WriteStatus(w io.Writer, st Status) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Leader: %s\n", st.Leader)
	b.WriteString("CleverNodeClasses:\n")
	if len(st.NodeClasses) == 0 {
		b.WriteString("  none: a NodePool needs one to launch anything\n")
	}
	for _, c := range st.NodeClasses {
		fmt.Fprintf(&b, "  %s\n", c.Name)
		for _, cond := range c.Conditions {
			fmt.Fprintf(&b, "    %s\n", cond)
		}
	}
	b.WriteString("Quota:\n")
	for _, l := range strings.Split(st.Quota, "\n") {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "Prices: %s\n", st.Prices)
	fmt.Fprintf(&b, "Flavor overrides: %s\n", st.Overrides)
	fmt.Fprintf(&b, "Preflight: %s\n", st.Preflight)
	b.WriteString("NodePools:\n")
	if len(st.NodePools) == 0 {
		b.WriteString("  none\n")
	}
	var total float64
	for _, p := range st.NodePools {
		var nodes []string
		for _, f := range slices.Sorted(maps.Keys(p.Nodes)) {
			nodes = append(nodes, fmt.Sprintf("%d %s", p.Nodes[f], f))
		}
		if len(nodes) == 0 {
			nodes = []string{"no node"}
		}
		fmt.Fprintf(&b, "  %s: %s, %.4f EUR/h", p.Name, strings.Join(nodes, ", "), p.CostHourly)
		if len(p.Unpriced) > 0 {
			fmt.Fprintf(&b, " (not priced: %s)", strings.Join(p.Unpriced, ", "))
		}
		if p.Limits != "" {
			fmt.Fprintf(&b, "; limits: %s", p.Limits)
		}
		b.WriteString("\n")
		total += p.CostHourly
	}
	if len(st.NodePools) > 0 {
		fmt.Fprintf(&b, "  total: %.4f EUR/h\n", total)
	}
	b.WriteString("Pending pods:\n")
	if len(st.Pending) == 0 {
		b.WriteString("  none\n")
	}
	for _, p := range st.Pending {
		if p.Reason == "" {
			fmt.Fprintf(&b, "  %s: no event yet\n", p.Pod)
			continue
		}
		fmt.Fprintf(&b, "  %s: %s: %s\n", p.Pod, p.Reason, p.Message)
	}
	if len(st.Unreadable) > 0 {
		b.WriteString("Could not read:\n")
		for _, k := range slices.Sorted(maps.Keys(st.Unreadable)) {
			fmt.Fprintf(&b, "  %s: %s\n", k, st.Unreadable[k])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteExplanation writes explain's answer for people: the pod, each NodePool with the
// flavors that could hold the pod and those excluded with why, then the cheapest node.
func WriteExplanation(w io.Writer, e Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s: %s\n", e.Pod, e.State)
	var req []string
	for _, k := range slices.Sorted(maps.Keys(e.Requests)) {
		req = append(req, k+" "+e.Requests[k])
	}
	fmt.Fprintf(&b, "Requests: %s\n", strings.Join(req, ", "))
	var could []string
	for _, p := range e.Pools {
		if p.Excluded != "" {
			fmt.Fprintf(&b, "NodePool %s: excluded: %s\n", p.Name, p.Excluded)
			continue
		}
		fmt.Fprintf(&b, "NodePool %s:\n", p.Name)
		var notAllowed, fit []string
		for _, f := range p.Flavors {
			switch {
			case len(f.Excluded) == 0:
				fit = append(fit, f.Name)
				fmt.Fprintf(&b, "  %-4s %.4f EUR/h  could hold it\n", f.Name, f.PriceHourly)
			case strings.HasPrefix(f.Excluded[0], ExcludedByPool+":"):
				notAllowed = append(notAllowed, f.Name)
			default:
				fmt.Fprintf(&b, "  %-4s %.4f EUR/h  excluded: %s\n", f.Name, f.PriceHourly, strings.Join(f.Excluded, "; "))
			}
		}
		if len(notAllowed) > 0 {
			fmt.Fprintf(&b, "  not allowed by the NodePool's requirements: %s\n", strings.Join(notAllowed, ", "))
		}
		if len(fit) > 0 {
			could = append(could, fmt.Sprintf("%s (%s)", p.Name, strings.Join(fit, ", ")))
		}
	}
	if len(e.Pools) == 0 {
		b.WriteString("NodePools: none\n")
	}
	if len(could) > 0 {
		fmt.Fprintf(&b, "Could hold it: %s\n", strings.Join(could, "; "))
	} else {
		b.WriteString("Could hold it: no NodePool and flavor now\n")
	}
	if c := e.Cheapest; c != nil {
		fmt.Fprintf(&b, "Cheapest new node: %s in NodePool %s, %.4f EUR/h\n", c.Flavor, c.Pool, c.PriceHourly)
	}
	if c := e.CheapestBeyondQuota; c != nil {
		fmt.Fprintf(&b, "Once the quota allows: %s in NodePool %s, %.4f EUR/h\n", c.Flavor, c.Pool, c.PriceHourly)
	}
	for _, n := range e.Notes {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
