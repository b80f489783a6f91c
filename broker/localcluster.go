package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// LocalClusterConfig configures a LocalCluster. Zero values mean the defaults.
type LocalClusterConfig struct {
	// Nodes is the number of servers; 0 means 3.
	Nodes int
	// Dir holds each node's JetStream store, in node-1, node-2, ...; required.
	Dir string
	// Name is the cluster's name; "" means "chiffon". The nodes are named node-1,
	// node-2, ...
	Name string
	// MaxPayload is each node's ServerConfig.MaxPayload, in bytes; 0 means 1 MiB.
	MaxPayload int32
	// ReadyTimeout bounds how long each node's start waits for it to accept
	// clients; 0 means 10 s.
	ReadyTimeout time.Duration
	// Debug turns on every node's own logging to stderr.
	Debug bool
}

// LocalCluster is a NATS cluster of embedded servers in this process, for tests and
// the bench: every node runs JetStream with its own store dir, listens on free ports
// of 127.0.0.1 and has routes to all the others. A node can be shut down and
// restarted on its ports and its data, as a node of a real cluster restarts.
type LocalCluster struct {
	mu    sync.Mutex
	cfgs  []ServerConfig // node i's, its ports fixed at the first start
	nodes []*Server      // nil while the node is down
}

// StartLocalCluster starts the nodes and waits, until ctx ends, for the cluster to
// form (see WaitJetStream). On a loaded machine of 2 cores this takes about
// a second or two: the nodes start at once and the JetStream meta group elects its
// leader as soon as the routes are up.
//
// The ports are chosen free at once before the nodes start; another process could
// take one in between, and the start then fails.
func StartLocalCluster(ctx context.Context, cfg LocalClusterConfig) (*LocalCluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("broker: a local cluster needs a store dir")
	}
	n := cfg.Nodes
	if n == 0 {
		n = 3
	}
	name := cfg.Name
	if name == "" {
		name = "chiffon"
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("broker: free ports for a local cluster: %w", err)
	}
	c := &LocalCluster{cfgs: make([]ServerConfig, n), nodes: make([]*Server, n)}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[n+j]))
			}
		}
		c.cfgs[i] = ServerConfig{
			Host: "127.0.0.1", Port: ports[i], Name: c.NodeName(i),
			JetStream: true, StoreDir: filepath.Join(cfg.Dir, c.NodeName(i)),
			MaxPayload: cfg.MaxPayload, ReadyTimeout: cfg.ReadyTimeout, Debug: cfg.Debug,
			Cluster: ClusterConfig{Name: name, Port: ports[n+i], Routes: routes},
		}
	}
	// A start waits for the node's listeners, not for its routes: the nodes start
	// one after the other and connect to each other as they come up.
	for i := range n {
		if err := c.Restart(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitJetStream(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open until all are chosen, so that no two are the same.
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Len is the number of nodes, running or not.
func (c *LocalCluster) Len() int { return len(c.cfgs) }

// NodeName is the server name of node i, as JetStream's cluster info reports it.
func (c *LocalCluster) NodeName(i int) string { return "node-" + strconv.Itoa(i+1) }

// Node is node i's server, or nil while the node is shut down.
func (c *LocalCluster) Node(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// ClientURL is node i's client URL, the same across its restarts.
func (c *LocalCluster) ClientURL(i int) string {
	return "nats://127.0.0.1:" + strconv.Itoa(c.cfgs[i].Port)
}

// ClientURLs are the client URLs of every node, for a client that fails over
// between them.
func (c *LocalCluster) ClientURLs() []string {
	urls := make([]string, len(c.cfgs))
	for i := range c.cfgs {
		urls[i] = c.ClientURL(i)
	}
	return urls
}

// Shutdown stops node i, if it runs, and waits until it has stopped; its store dir
// stays. The other nodes and the clients see it leave at once, as after a crash,
// though the node closes its store cleanly.
func (c *LocalCluster) Shutdown(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
	}
}

// Restart starts node i again on its ports and its store dir, shutting it down
// first if it runs, and waits until it accepts clients. WaitJetStream then waits
// until it has rejoined the cluster.
func (c *LocalCluster) Restart(i int) error {
	c.Shutdown(i)
	s, err := StartServer(c.cfgs[i])
	if err != nil {
		return fmt.Errorf("broker: %s: %w", c.NodeName(i), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[i] = s
	return nil
}

// Close shuts every node down.
func (c *LocalCluster) Close() {
	for i := range c.cfgs {
		c.Shutdown(i)
	}
}

// MetaLeader is the index of the node that leads JetStream's meta group, or -1
// when no running node does.
func (c *LocalCluster) MetaLeader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.nodes {
		if s != nil && s.ns.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// WaitJetStream waits until ctx ends for the running nodes to form a cluster: each
// has routes to all the others, one leads JetStream's meta group, every node
// follows it and knows every peer of the group, down ones too, and the running
// followers are current. Streams of as many replicas as nodes run can then be made.
//
// A node that merely reports itself current is not enough: a follower that has no
// leader or an empty log also does, and two such nodes cannot elect a leader
// without the third.
func (c *LocalCluster) WaitJetStream(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		state, formed := c.state()
		if formed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: local cluster not formed (%s): %w", state, ctx.Err())
		case <-tick.C:
		}
	}
}

// state describes each running node's routes and view of JetStream's meta group,
// and says whether the cluster has formed.
func (c *LocalCluster) state() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	running := map[string]bool{}
	for i, s := range c.nodes {
		if s != nil {
			running[c.NodeName(i)] = true
		}
	}
	var desc []string
	leaders := 0 // running nodes that lead the meta group by their own account
	formed := true
	for i, s := range c.nodes {
		name := c.NodeName(i)
		if s == nil {
			desc = append(desc, name+" down")
			continue
		}
		routes := s.ns.NumRemotes()
		info, err := s.ns.Jsz(&server.JSzOptions{})
		if err != nil || info.Meta == nil {
			desc = append(desc, fmt.Sprintf("%s: %d of %d routes, no meta group", name, routes, len(running)-1))
			formed = false
			continue
		}
		m := info.Meta
		current := 0
		for _, p := range m.Replicas {
			if running[p.Name] && p.Current {
				current++
			}
		}
		leader := m.Leader == name && s.ns.JetStreamIsLeader()
		leaders += btoi(leader)
		formed = formed && routes == len(running)-1 && running[m.Leader] && len(m.Replicas) == len(c.nodes)-1 &&
			(!leader || current == len(running)-1)
		desc = append(desc, fmt.Sprintf("%s: %d of %d routes, meta leader %q, %d of %d peers known, %d current",
			name, routes, len(running)-1, m.Leader, len(m.Replicas), len(c.nodes)-1, current))
	}
	// Every node may name a leader that has not yet taken the lead, or has just
	// stepped down: the one named must say it leads.
	return strings.Join(desc, "; "), formed && leaders == 1
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
