package orchestrator

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/badgerstore"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// The kinds of task store (StoreConfig.Kind).
const (
	// StoreBadger keeps tasks in <data_dir>/tasks on this host: the default.
	StoreBadger = "badger"
	// StoreJetStream keeps tasks in the broker's JetStream, replicated across the
	// nodes of a NATS cluster.
	StoreJetStream = "jetstream"
)

// StoreConfig chooses where the orchestrator keeps its tasks.
type StoreConfig struct {
	// Kind is "badger" (the default) or "jetstream".
	Kind string `yaml:"kind"`
	// JetStream configures the JetStream store.
	JetStream JetStreamStoreConfig `yaml:"jetstream"`
}

// JetStreamStoreConfig names the JetStream stream that holds the tasks.
type JetStreamStoreConfig struct {
	// Stream is the stream's name; "" means CHIFFON_TASKS.
	Stream string `yaml:"stream"`
	// SubjectPrefix is the prefix of the stream's subjects; "" means <nats
	// prefix>.store (chiffon.store), the subjects the broker's permissions give the
	// orchestrator alone.
	SubjectPrefix string `yaml:"subject_prefix"`
	// Replicas is how many nodes of the cluster hold the stream: 1 (the default),
	// 3 or 5.
	Replicas int `yaml:"replicas"`
	// NATS is the identity of the store's own NATS connection, the only one the
	// broker lets use the JetStream API and write the store's subjects (chiffon
	// init writes orchestrator-store.nk for it): the connection that answers
	// agents cannot publish there, whatever reply subject a sender picks. Its
	// nkey_file or creds_file, and tls, replace those of the nats section; urls
	// and prefix are always the nats section's. Unset, the store connects as the
	// nats section's identity.
	NATS broker.NATSConfig `yaml:"nats"`
}

// StoreNATS is the nats section of the store's connection: the orchestrator's,
// with the identity and client certificate store.jetstream.nats names.
func (c Config) StoreNATS() broker.NATSConfig {
	n, own := c.NATS, c.Store.JetStream.NATS
	if own.NKeyFile != "" || own.CredsFile != "" {
		n.NKeyFile, n.CredsFile = own.NKeyFile, own.CredsFile
	}
	if own.TLS.CAFile != "" {
		n.TLS.CAFile = own.TLS.CAFile
	}
	if own.TLS.CertFile != "" || own.TLS.KeyFile != "" {
		n.TLS.CertFile, n.TLS.KeyFile = own.TLS.CertFile, own.TLS.KeyFile
	}
	if own.TLS.ServerName != "" {
		n.TLS.ServerName = own.TLS.ServerName
	}
	return n
}

var (
	streamName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	subjectPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// Validate checks c and names the offending key.
func (c StoreConfig) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: store.%s: %s", key, fmt.Sprintf(format, args...))
	}
	switch c.Kind {
	case "", StoreBadger, StoreJetStream:
	default:
		return bad("kind", "must be %s or %s, got %q", StoreBadger, StoreJetStream, c.Kind)
	}
	js := c.JetStream
	if js.Stream != "" && !streamName.MatchString(js.Stream) {
		return bad("jetstream.stream", "must be 1 to 64 letters, digits, '-' or '_', got %q", js.Stream)
	}
	if js.SubjectPrefix != "" && !subjectPrefix.MatchString(js.SubjectPrefix) {
		return bad("jetstream.subject_prefix", "must be dot-separated tokens of letters, digits, '-' or '_', got %q", js.SubjectPrefix)
	}
	switch js.Replicas {
	case 0, 1, 3, 5:
	default:
		return bad("jetstream.replicas", "must be 1, 3 or 5, got %d", js.Replicas)
	}
	if len(js.NATS.URLs) > 0 || js.NATS.Prefix != "" {
		return bad("jetstream.nats", "takes nkey_file, creds_file and tls only: urls and prefix are the nats section's")
	}
	if js.NATS.NKeyFile != "" || js.NATS.CredsFile != "" || js.NATS.TLS != (broker.ClientTLS{}) {
		if err := js.NATS.Validate(); err != nil {
			return fmt.Errorf("config: store.jetstream.%w", err)
		}
	}
	return nil
}

// storeConn is the store's own NATS connection (store.jetstream.nats): it
// serves no incoming message, so nothing a sender picks is ever published with
// its rights. Its requests' answers come to the store's inbox.
func storeConn(cfg Config, name string, log *slog.Logger) (*nats.Conn, error) {
	n := cfg.StoreNATS()
	cc := n.ConnConfig(name)
	cc.Logger = log
	cc.InboxPrefix = broker.Subjects{Prefix: cfg.NATS.Prefix}.StoreInbox()
	nc, err := broker.Connect(cc)
	if err != nil {
		return nil, fmt.Errorf("connect the task store to NATS: %w", err)
	}
	return nc, nil
}

// openStore opens the task store cfg names: Badger in <data_dir>/tasks, or the
// JetStream stream of the broker nc is connected to.
func openStore(cfg Config, nc *nats.Conn, log *slog.Logger) (task.Store, error) {
	if cfg.Store.Kind == StoreJetStream {
		js := cfg.Store.JetStream
		if js.SubjectPrefix == "" {
			// Under the site's prefix, where the broker's permissions let the
			// orchestrator alone publish (broker.Subjects.Store).
			js.SubjectPrefix = broker.Subjects{Prefix: cfg.NATS.Prefix}.Store()
		}
		st, err := jsstore.Open(nc, jsstore.Options{Stream: js.Stream, Prefix: js.SubjectPrefix,
			Replicas: js.Replicas, Retention: cfg.Retention, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open the JetStream task store: %w", err)
		}
		return st, nil
	}
	return badgerstore.Open(filepath.Join(cfg.DataDir, "tasks"), badgerstore.Options{Retention: cfg.Retention, Logger: log})
}
