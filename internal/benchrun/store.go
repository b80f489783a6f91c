package benchrun

import (
	"context"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go/jetstream"
)

// startBroker starts the embedded broker cfg needs, its JetStream data in dir: one
// server, with JetStream for the JetStream store, or a cluster of cfg.Replicas
// nodes. Every client of the bench connects to the first node, so that each run
// pays the same hops; the task stream's leader is whichever node JetStream chose.
func startBroker(ctx context.Context, dir string, cfg Config) (url string, stop func(), err error) {
	if cfg.Replicas > 1 {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c, err := broker.StartLocalCluster(ctx, broker.LocalClusterConfig{Nodes: cfg.Replicas, Dir: dir})
		if err != nil {
			return "", nil, err
		}
		return c.ClientURL(0), c.Close, nil
	}
	srvCfg := broker.ServerConfig{}
	if cfg.Store == orchestrator.StoreJetStream {
		srvCfg = broker.ServerConfig{JetStream: true, StoreDir: dir}
	}
	srv, err := broker.StartServer(srvCfg)
	if err != nil {
		return "", nil, err
	}
	return srv.ClientURL(), srv.Shutdown, nil
}

// storeConfig is the orchestrator's task store, its JetStream stream and subjects
// those of the run named run.
func (c Config) storeConfig(run string) orchestrator.StoreConfig {
	sc := orchestrator.StoreConfig{Kind: c.Store}
	if c.Store == orchestrator.StoreJetStream {
		sc.JetStream = orchestrator.JetStreamStoreConfig{Stream: "CHIFFON_BENCH_" + run,
			SubjectPrefix: "chiffonbench" + run + ".store", Replicas: c.Replicas}
	}
	return sc
}

// streamReplicas asks the broker at url how many replicas stream has.
func streamReplicas(ctx context.Context, url, stream string) (int, error) {
	nc, err := connect(url, "chiffon-bench-store")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().Config.Replicas, nil
}
