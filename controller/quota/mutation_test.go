package quota_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/quotasim"
)

// maxMutationSeeds bounds the search for a seed that catches a mutation: as many as make
// test's own run of the simulation, so what it lets through, make test would too.
const maxMutationSeeds = 2000

// A simulation that cannot fail where it matters proves nothing: with each rule the
// guarantees rest on switched off, the deterministic simulation must fail, and first at the
// seed docs/quota.md names, so the page tells how to see each rule matter.
func TestTheSimulationCatches(t *testing.T) {
	page, err := os.ReadFile("../../docs/quota.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^  \\| ([a-z0-9 ]+) \\| ([0-9]+) \\|$").FindAllStringSubmatch(string(page), -1)
	if len(rows) < 4 {
		t.Fatalf("docs/quota.md lists %d mutations with their seeds, want the 4 the issue named at least", len(rows))
	}
	for _, row := range rows {
		name, documented := row[1], row[2]
		t.Run(name, func(t *testing.T) {
			restore, ok := quota.Mutate(name)
			defer restore()
			if !ok {
				t.Fatalf("docs/quota.md lists %q, which is no mutation the quota package knows", name)
			}
			for seed := uint64(1); seed <= maxMutationSeeds; seed++ {
				v := quotasim.New(quotasim.Config{Seed: seed, Duration: time.Hour}).Run()
				if v == nil {
					continue
				}
				if got := strconv.FormatUint(seed, 10); got != documented {
					t.Errorf("the simulation first catches %q at seed %s, docs/quota.md says %s: %s", name, got, documented, v.What)
				}
				t.Logf("caught at seed %d: %s", seed, v.What)
				return
			}
			t.Errorf("no seed of %d catches %q", maxMutationSeeds, name)
		})
	}
}
