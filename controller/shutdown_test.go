package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Every controller of the manager (core's and ours) hands work to its workers through
// controller-runtime's priority queue, and SIGTERM stops the process only once every worker
// has returned from the queue. Before controller-runtime v0.25.3 the queue could hand an item
// to a worker that had already left on shutdown: the hand-off then blocked forever with the
// queue's lock held, the controller's workers never finished, and the process outlived its
// grace period still holding the leader lease. This pins the fixed queue: many rounds of busy
// workers shut down mid-flow, each of which must see every worker return.
func TestTheWorkQueueReleasesEveryWorkerOnShutdown(t *testing.T) {
	const rounds, workers = 300, 4
	for round := range rounds {
		if err := shutDownBusyQueue(workers); err != nil {
			t.Fatalf("round %d of %d: %v", round+1, rounds, err)
		}
	}
}

func shutDownBusyQueue(workers int) error {
	q := priorityqueue.New[int]("shutdown-test")
	var running sync.WaitGroup
	for range workers {
		running.Go(func() {
			for {
				item, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				q.Done(item)
			}
		})
	}
	stopAdding := make(chan struct{})
	var adding sync.WaitGroup
	adding.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopAdding:
				return
			default:
			}
			q.AddWithOpts(priorityqueue.AddOpts{Priority: new(i % 3)}, i%64)
		}
	})
	// Let the workers and the producer reach a steady flow before the shutdown lands in it.
	for q.Len() == 0 {
		q.AddWithOpts(priorityqueue.AddOpts{}, -1)
	}
	q.ShutDown()
	close(stopAdding)
	adding.Wait()
	returned := make(chan struct{})
	go func() { running.Wait(); close(returned) }()
	select {
	case <-returned:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("workers still blocked in GetWithPriority 10s after ShutDown")
	}
}
