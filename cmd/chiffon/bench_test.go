package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchAsCLIEnv makes this test binary act as the chiffon command, so that the bench
// can start it as the idle agent and orchestrator.
const benchAsCLIEnv = "CHIFFON_BENCH_TEST_AS_CLI"

func init() {
	if os.Getenv(benchAsCLIEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// TestBenchPrintsEveryFigure runs a short bench and checks that every key is there
// with a sane value. It never asserts speed.
func TestBenchPrintsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS, an orchestrator, an agent and two subprocesses")
	}
	t.Setenv(benchAsCLIEnv, "1") // for the subprocesses: this one has passed init
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"bench", "--tasks", "20", "--inflight", "4", "--json"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res map[string]float64
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not one JSON object of numbers: %v\n%s", err, out.String())
	}
	for _, key := range []string{"raw_tasks_per_s", "chiffon_tasks_per_s", "throughput_ratio", "raw_p50_us",
		"chiffon_p50_us", "chiffon_p99_us", "latency_ratio", "chiffon_cpu_us_per_task", "raw_cpu_us_per_req", "api_tasks_per_s", "chunk_mib_per_s",
		"peak_rss_mib", "idle_agent_rss_mib", "idle_orchestrator_rss_mib"} {
		v, ok := res[key]
		if !ok {
			t.Errorf("%s missing from %s", key, out.String())
			continue
		}
		if v <= 0 || v > 1e9 {
			t.Errorf("%s = %v, want a positive figure", key, v)
		}
	}
	if res["chiffon_p99_us"] < res["chiffon_p50_us"] {
		t.Errorf("chiffon p99 %v is below p50 %v", res["chiffon_p99_us"], res["chiffon_p50_us"])
	}
}

// TestBenchOnJetStream runs the chiffon, api and chunks phases with the
// orchestrator's tasks in JetStream, on a server of the test's: the tasks end there,
// the bench reports a stream of one replica, and the server's stream holds them
// afterwards. It never asserts speed.
func TestBenchOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS with JetStream, an orchestrator and an agent")
	}
	srv := testnats.Start(t, broker.ServerConfig{JetStream: true, StoreDir: testnats.StoreDir(t)})
	if res := benchJSON(t, "--nats", srv.ClientURL(), "--store", "jetstream"); res["replicas"] != 1 {
		t.Errorf("the task stream has %v replicas, want 1", res["replicas"])
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var msgs uint64
	for info := range js.ListStreams(ctx).Info() {
		if strings.HasPrefix(info.Config.Name, "CHIFFON_BENCH_") {
			msgs += info.State.Msgs
		}
	}
	if msgs == 0 {
		t.Fatal("the bench's tasks are not in the server's JetStream")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"bench", "--store", "etcd"}, nil, &out, &errb)
	if code == 0 || !bytes.Contains(errb.Bytes(), []byte("store.kind")) {
		t.Errorf("--store etcd: exit %d, %s", code, errb.String())
	}
}

// benchJSON runs `chiffon bench --json` with a short run's settings and args, and
// returns its figures.
func benchJSON(t *testing.T, args ...string) map[string]float64 {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"bench", "--tasks", "20", "--inflight", "4", "--no-idle", "--json"}, args...)
	if code := run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	var res map[string]float64
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not one JSON object of numbers: %v\n%s", err, out.String())
	}
	for _, key := range []string{"chiffon_tasks_per_s", "api_tasks_per_s", "chunk_mib_per_s"} {
		if v := res[key]; v <= 0 {
			t.Errorf("%s = %v, want a positive figure", key, v)
		}
	}
	return res
}

// TestBenchKeepsTasksInThreeReplicasOnACluster: with --replicas 3 the bench starts
// a three-node cluster of its own and reports the task stream's replicas as the
// broker gives them; on a cluster of the test's, the stream it leaves has 3
// replicas, both followers current, and holds the tasks. --replicas without the
// JetStream store, or a count JetStream's store refuses, is an error. It never
// asserts speed.
func TestBenchKeepsTasksInThreeReplicasOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two NATS clusters, an orchestrator and an agent on each")
	}
	if res := benchJSON(t, "--store", "jetstream", "--replicas", "3"); res["replicas"] != 3 {
		t.Errorf("the bench's own cluster: the task stream has %v replicas, want 3", res["replicas"])
	}

	c := testnats.StartCluster(t, broker.LocalClusterConfig{})
	benchJSON(t, "--nats", c.ClientURL(0), "--store", "jetstream", "--replicas", "3")
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	if len(streams) != 1 || !strings.HasPrefix(streams[0], "CHIFFON_BENCH_") {
		t.Fatalf("streams on the cluster: %v, want the bench's one", streams)
	}
	_, info := c.WaitStream(js, streams[0])
	current := 0
	for _, r := range info.Cluster.Replicas {
		if r.Current {
			current++
		}
	}
	if info.Config.Replicas != 3 || current != 2 || info.State.Msgs == 0 {
		t.Fatalf("the bench's stream: %d replicas, %d followers current, %d messages; want 3, 2 and the tasks",
			info.Config.Replicas, current, info.State.Msgs)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "3"}, "only the jetstream store has replicas"},
		{[]string{"--store", "jetstream", "--replicas", "2"}, "store.jetstream.replicas"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"bench"}, tc.args...), nil, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("bench %v: exit %d, %q; want an error with %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
