package orchestrator_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// benchStack opens an orchestrator and a real agent with a no-op work type on an
// embedded server, with Badger stores in b.TempDir(), and waits until the agent is
// online. With secure, the server is the one a site runs: TLS, an NKey per daemon
// and each one's allow lists.
func benchStack(b *testing.B, capacity int, secure bool) *orchestrator.Orchestrator {
	b.Helper()
	var orchNATS, agentNATS broker.NATSConfig
	if secure {
		ids := []broker.Identity{{Role: broker.RoleOrchestrator}, {Role: broker.RoleAgent, Name: "bench-1"}}
		seeds, users := siteUsers(b, ids)
		srv := testnats.StartSecure(b, users)
		orchNATS = broker.NATSConfig{URLs: []string{srv.ClientURL()}, NKeyFile: seeds[0], TLS: srv.TLS}
		agentNATS = broker.NATSConfig{URLs: []string{srv.ClientURL()}, NKeyFile: seeds[1], TLS: srv.TLS}
	} else {
		srv := testnats.Start(b, broker.ServerConfig{})
		orchNATS = broker.NATSConfig{URLs: []string{srv.ClientURL()}}
		agentNATS = orchNATS
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	orchToken, agentToken := broker.NewToken(), broker.NewToken()
	dir := b.TempDir()
	o, err := orchestrator.Open(orchestrator.Config{NATS: orchNATS, DataDir: filepath.Join(dir, "orch"),
		Agents:   []policy.AgentConfig{{ID: "bench-1", Type: envelope.Infra, Token: agentToken, OrchestratorToken: orchToken}},
		APIToken: broker.NewToken()}, orchestrator.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	a, err := agent.New(agent.Config{ID: "bench-1", Type: "infra", NATS: agentNATS, DataDir: filepath.Join(dir, "agent"),
		MaxConcurrency: capacity, Token: agentToken, OrchestratorToken: orchToken, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	a.Handle("noop", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		return agent.Result{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done; o.Close() })
	deadline := time.Now().Add(wait)
	for {
		if as := o.Agents(); len(as) == 1 && as[0].State == "online" {
			return o
		}
		if time.Now().After(deadline) {
			b.Fatal("agent not online")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reportCPU starts counting this process's CPU time (user and system, every
// goroutine: orchestrator, agent and the embedded server); the function it returns
// reports it per operation as cpu-µs/op. Where the cores are all busy, as on a
// 2-core machine, throughput is this figure's inverse, and it moves less from run
// to run than ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runNoop(b *testing.B, o *orchestrator.Orchestrator) {
	t, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Infra, WorkType: "noop"})
	if err != nil {
		b.Fatal(err)
	}
	if t, err = o.Wait(context.Background(), t.ID); err != nil || t.State != task.StateSucceeded {
		b.Fatalf("task ended %v: %v", t, err)
	}
}

// BenchmarkDispatch is one no-op task at a time from Submit to its recorded result:
// store, routing, breaker, publish, the agent's checks and dedupe write, ack, result.
func BenchmarkDispatch(b *testing.B) {
	o := benchStack(b, 4, false)
	b.ReportAllocs()
	for b.Loop() {
		runNoop(b, o)
	}
}

// BenchmarkDispatchParallel is the same with many tasks in flight.
func BenchmarkDispatchParallel(b *testing.B) {
	o := benchStack(b, 256, false)
	// b.Loop leaves benchStack out of the time by itself; RunParallel does not,
	// and the agent's registration alone takes Timeouts.InstanceProbe (500 ms).
	b.ResetTimer()
	b.ReportAllocs()
	b.SetParallelism(32)
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			runNoop(b, o)
		}
	})
}

// BenchmarkDispatchSecure is BenchmarkDispatch through a broker with TLS, NKeys and
// subject permissions, as every site runs: what the security costs a task.
func BenchmarkDispatchSecure(b *testing.B) {
	o := benchStack(b, 4, true)
	b.ReportAllocs()
	for b.Loop() {
		runNoop(b, o)
	}
}

// BenchmarkDispatchParallelSecure is BenchmarkDispatchParallel through the secure
// broker.
func BenchmarkDispatchParallelSecure(b *testing.B) {
	o := benchStack(b, 256, true)
	b.ResetTimer() // as in BenchmarkDispatchParallel
	b.ReportAllocs()
	b.SetParallelism(32)
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			runNoop(b, o)
		}
	})
}
