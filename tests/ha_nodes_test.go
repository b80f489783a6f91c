package tests

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// procNodes are three NATS nodes run as `chiffon broker --config` processes, so
// that a node can crash: a SIGKILL leaves its stream leaderships to the raft
// election of the others, as on a real host, where an in-process shutdown hands
// them over first.
type procNodes struct {
	s      *haSite
	client []int // node i's client port
	procs  []*proc
}

// startProcNodes writes the three nodes' configs (JetStream, one cluster, routes
// to each other on 127.0.0.1) and starts them, waiting until the cluster has
// formed.
func startProcNodes(s *haSite) natsNodes {
	s.t.Helper()
	const n = 3
	ports := distinctFreePorts(s, 2*n)
	nodes := &procNodes{s: s, client: ports[:n], procs: make([]*proc, n)}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+j]))
			}
		}
		s.write(nodeName(i)+".conf", fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
max_payload: 8388608
jetstream {store_dir: %q}
cluster {
  name: chiffon
  listen: "127.0.0.1:%d"
  routes: [%s]
}
`, nodeName(i), ports[i], filepath.Join(s.dir, "data", nodeName(i)), ports[n+i], strings.Join(routes, ", ")))
	}
	for i := range n {
		nodes.spawn(i)
	}
	nodes.waitJetStream()
	return nodes
}

// nodeName is node i's server name, as a stream's cluster info gives it.
func nodeName(i int) string { return "node-" + strconv.Itoa(i+1) }

// distinctFreePorts returns n distinct ports that were free a moment ago.
func distinctFreePorts(s *haSite, n int) []int {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		if p := freePort(s.t); !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

func (n *procNodes) ClientURLs() []string {
	urls := make([]string, len(n.client))
	for i, p := range n.client {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	return urls
}

func (n *procNodes) NodeIndex(name string) int {
	for i := range n.client {
		if nodeName(i) == name {
			return i
		}
	}
	return -1
}

// kill SIGKILLs node i and waits for it to exit.
func (n *procNodes) kill(i int) { n.procs[i].kill(n.s.t) }

// start starts node i again on its config and data and waits until it takes
// clients and JetStream answers through it.
func (n *procNodes) start(i int) {
	n.s.t.Helper()
	n.spawn(i)
	n.waitJetStream()
}

// spawn starts node i's process and waits until it takes connections.
func (n *procNodes) spawn(i int) {
	s := n.s
	s.t.Helper()
	n.procs[i] = s.spawn(nodeName(i), "broker", "--config", filepath.Join(s.dir, nodeName(i)+".conf"))
	addr := "127.0.0.1:" + strconv.Itoa(n.client[i])
	s.waitFor(nodeName(i)+" listening", 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// waitJetStream waits until every running node answers JetStream's account
// info: the meta group has a leader the node follows.
func (n *procNodes) waitJetStream() {
	s := n.s
	s.t.Helper()
	for i, p := range n.procs {
		if p == nil || !p.alive() {
			continue
		}
		nc, err := nats.Connect(n.ClientURLs()[i])
		if err != nil {
			s.t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			s.t.Fatal(err)
		}
		s.waitFor(nodeName(i)+" in the JetStream cluster", time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js.AccountInfo(ctx)
			return err == nil
		})
		nc.Close()
	}
}
