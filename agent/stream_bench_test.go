package agent

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
)

// BenchmarkStreamTenMiB is a handler writing 10 MiB at once: the stream copies it,
// chunks it into 256 KiB work_status envelopes and publishes them (to a subject with
// no subscriber, so only the agent's side is measured).
func BenchmarkStreamTenMiB(b *testing.B) {
	srv, err := broker.StartServer(broker.ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{srv.ClientURL()}, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := &publisher{nc: nc, auth: broker.AuthHeader(broker.NewToken(), "bench-1"), log: log}
	req := envelope.New(envelope.Orchestrator, envelope.Infra, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "bench"})
	line := "2026-01-19T04:21:04Z kuma[1]: monitor \"uptime\" ok <200> took 12ms\n"
	out := []byte(strings.Repeat(line, (10<<20)/len(line)+1)[:10<<20])
	b.ReportAllocs()
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		s := newTaskStream(pub, req, "bench.sink", 10*time.Second, DefaultMaxOutputBytes)
		s.start()
		if _, err := s.Write(out); err != nil {
			b.Fatal(err)
		}
		if got := s.closeOutput(); len(got) != len(out) {
			b.Fatal(len(got))
		}
	}
}
