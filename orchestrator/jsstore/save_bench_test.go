package jsstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// BenchmarkSave is one write of a record and an event at a time, each waited for:
// what a task's commit costs on JetStream, on one server and on a stream of 3
// replicas on a three-node cluster in this process.
func BenchmarkSave(b *testing.B) { eachBenchStore(b, benchSave) }

// eachBenchStore runs bench on a store on one server and on one of 3 replicas
// on a three-node cluster in this process.
func eachBenchStore(b *testing.B, bench func(*testing.B, *jsstore.Store)) {
	run := func(b *testing.B, url string, replicas int) {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		s, err := jsstore.Open(nc, jsstore.Options{Stream: "BENCH", Prefix: "bench.store", Replicas: replicas})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		bench(b, s)
	}
	b.Run("one-server", func(b *testing.B) {
		srv := testnats.Start(b, broker.ServerConfig{JetStream: true, StoreDir: testnats.StoreDir(b)})
		run(b, srv.ClientURL(), 1)
	})
	b.Run("three-replicas", func(b *testing.B) {
		c := testnats.StartCluster(b, broker.LocalClusterConfig{})
		run(b, c.ClientURL(0), 3)
	})
}

func benchSave(b *testing.B, s *jsstore.Store) {
	tk := &task.Task{ID: "task-bench", State: task.StateRunning, ToAgent: envelope.Code, WorkType: "echo"}
	errc := make(chan error, 1)
	n := int64(0)
	for b.Loop() {
		n++
		ev := &task.Event{Seq: n, Type: task.EventState, State: task.StateRunning, Message: fmt.Sprint(n)}
		s.Save(&task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{ev}}, func(err error) { errc <- err })
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveParallel is writes of a record and an event from 64 goroutines at
// once, each waited for: the commits group as the orchestrator's do under load.
func BenchmarkSaveParallel(b *testing.B) { eachBenchStore(b, benchSaveParallel) }

func benchSaveParallel(b *testing.B, s *jsstore.Store) {
	var next atomic.Int64
	b.SetParallelism(32) // 32 writers a CPU: 64 on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		errc := make(chan error, 1)
		for pb.Next() {
			n := next.Add(1)
			tk := &task.Task{ID: fmt.Sprintf("task-%d", n%1000), State: task.StateRunning, ToAgent: envelope.Code, WorkType: "echo"}
			ev := &task.Event{Seq: n, Type: task.EventState, State: task.StateRunning, Message: fmt.Sprint(n)}
			s.Save(&task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{ev}}, func(err error) { errc <- err })
			if err := <-errc; err != nil {
				b.Error(err)
				return
			}
		}
	})
}
