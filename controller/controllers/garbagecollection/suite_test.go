package garbagecollection_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var (
	env *testenv.Env
	// gc is driven pass by pass (Collect) on a fake clock; no loop runs it.
	gc      *garbagecollection.Controller
	gcClock *clocktesting.FakeClock
)

// TestMain starts a real apiserver shared by the tests, and a collector they drive pass by
// pass with uncached reads, as main.go's would read.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	gcClock = clocktesting.NewFakeClock(time.Now())
	// Its events are not looked at: a recorder without a channel drops them.
	gc = garbagecollection.New(env.Client, env.Client, events.NewRecorder(&record.FakeRecorder{}), gcClock, time.Minute)
	return m.Run()
}
