package jsstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrClosed is the error of a write to a closed Store.
var ErrClosed = errors.New("jsstore: store closed")

// ErrInvalidID is the error of a write of a task whose id cannot be a subject
// token: empty, or holding '.', '*', '>' or white space.
var ErrInvalidID = errors.New("jsstore: invalid task id")

// Defaults of Options.
const (
	DefaultStream = "CHIFFON_TASKS"
	DefaultPrefix = "chiffon.store"
)

// opTimeout bounds each request to the server: a commit, a page of a read, a
// purge.
const opTimeout = 10 * time.Second

// Options configures a Store.
type Options struct {
	// Stream is the name of the stream that holds the tasks; "" means
	// DefaultStream.
	Stream string
	// Prefix is the subject prefix of everything stored; "" means DefaultPrefix.
	// The stream takes Prefix.> for itself.
	Prefix string
	// Replicas is the stream's number of replicas; 0 means 1.
	Replicas int
	// Retention is how long a finished task is kept (see task.Store); 0 keeps
	// finished tasks forever.
	Retention time.Duration
	// Logger receives the sweep's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Store keeps tasks, their events and their output in a JetStream stream. It
// implements task.Store.
type Store struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	stream    jetstream.Stream
	name      string // the stream's
	prefix    string
	retention time.Duration
	log       *slog.Logger
	// leaderReads reads a task's record from the stream's leader rather than with a
	// direct get, which a follower a little behind may answer: with replicas, a
	// task read right after its last commit must not show an older state.
	leaderReads bool
	// ordered commits without atomic batches (commitOrdered): on one replica
	// they cost a store on disk each.
	ordered bool
	// maxData is the largest message body the server takes, less room for the
	// batch headers.
	maxData int

	mu     sync.Mutex
	closed bool
	queue  []*pending // writes to commit, in Save order
	held   []*pending // MoreComing writes, waiting for the next Save, Flush or Close

	// el is the store's part in an election (Elect), or nil; the leadership
	// record it last saw or wrote, and until when it leads, are published here.
	el          *election
	leader      Leader
	leaderKnown bool
	validUntil  time.Time
	closedAt    time.Time

	wake       chan struct{} // tells the writer there is work (capacity 1)
	writerDone chan struct{}
	stopSweep  context.CancelFunc
	sweepDone  chan struct{}
}

var _ task.Store = (*Store)(nil)

// Open creates the stream opts names, or updates its configuration, and returns a
// store on it. The store uses nc and does not close it. Close the store.
func Open(nc *nats.Conn, opts Options) (*Store, error) {
	if opts.Stream == "" {
		opts.Stream = DefaultStream
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("jsstore: negative retention %s", opts.Retention)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(opTimeout))
	if err != nil {
		return nil, fmt.Errorf("jsstore: %w", err)
	}
	stream, err := createStream(js, opts, jetstream.StreamConfig{
		Name:               opts.Stream,
		Subjects:           []string{opts.Prefix + ".>"},
		Storage:            jetstream.FileStorage,
		MaxMsgsPerSubject:  1,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		Replicas:           opts.Replicas,
	})
	if err != nil {
		return nil, openError(nc, opts, err)
	}
	if info := stream.CachedInfo(); info == nil || !info.Config.AllowAtomicPublish || !info.Config.AllowDirect {
		return nil, fmt.Errorf("jsstore: stream %s: the server does not allow atomic batches and direct gets (nats-server 2.12 or later needed)", opts.Stream)
	}
	s := &Store{
		nc: nc, js: js, stream: stream, ordered: opts.Replicas == 1, name: opts.Stream, prefix: opts.Prefix,
		retention: opts.Retention, log: opts.Logger, leaderReads: opts.Replicas > 1,
		maxData:    int(nc.MaxPayload()) - batchHeaderRoom,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	go s.writer()
	if s.retention > 0 {
		sctx, stop := context.WithCancel(context.Background())
		s.stopSweep, s.sweepDone = stop, make(chan struct{})
		go s.sweeper(sctx)
	}
	return s, nil
}

// joinPatience is how long Open waits for the servers of a cluster to be up
// and joined, when too few are for the stream's replicas: the hosts of a site
// boot in any order.
var joinPatience = 60 * time.Second

// createStream creates or updates the stream, waiting up to joinPatience while
// the cluster has too few servers joined for its replicas (10005).
func createStream(js jetstream.JetStream, opts Options, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	deadline := time.Now().Add(joinPatience)
	wait := 250 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		stream, err := js.CreateOrUpdateStream(ctx, cfg)
		cancel()
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != 10005 || time.Now().Add(wait).After(deadline) {
			return stream, err
		}
		opts.Logger.Info("waiting for the JetStream cluster's servers to join, for the stream's replicas",
			"stream", opts.Stream, "replicas", opts.Replicas, "err", err)
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
}

// openError says why the stream could not be made, with a hint for the usual
// causes: a broker without JetStream, an identity the broker does not let use it.
func openError(nc *nats.Conn, opts Options, err error) error {
	err = fmt.Errorf("jsstore: create stream %s: %w", opts.Stream, err)
	if last := nc.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w: the broker refused this identity: %w (it needs to publish to %s.> and $JS.API.>)", err, last, opts.Prefix)
	}
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10005: // no suitable peers for placement
			return fmt.Errorf("%w: the stream needs %d JetStream servers of one cluster up and joined; start every node first, or lower store.jetstream.replicas", err, opts.Replicas)
		case 10074: // replicas > 1 not supported in non-clustered mode
			return fmt.Errorf("%w: the broker is one server, not a cluster: set store.jetstream.replicas to 1, or run a NATS cluster", err)
		}
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w: is JetStream enabled on the broker (chiffon broker --jetstream, or a jetstream block in its config)?", err)
	}
	return err
}

// Close commits what is queued or held (trying for at most opTimeout when the
// server is out of reach), resigns the lead if the store leads, then stops the
// writer and the sweep and waits for them. Later writes fail with ErrClosed. Close does not close the
// connection.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	if !already {
		s.closed, s.closedAt = true, time.Now()
		s.queue = append(s.queue, s.held...)
		s.held = nil
	}
	s.mu.Unlock()
	if !already {
		s.signal()
		if s.stopSweep != nil {
			s.stopSweep()
		}
	}
	<-s.writerDone
	if s.sweepDone != nil {
		<-s.sweepDone
	}
	return nil
}

// signal wakes the writer.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Subjects.

func (s *Store) taskSubject(id string) string   { return s.prefix + ".t." + id }
func (s *Store) markerSubject(id string) string { return s.prefix + ".f." + id }
func (s *Store) eventsFilter(id string) string  { return s.prefix + ".e." + id + ".*" }
func (s *Store) outputFilter(id string) string  { return s.prefix + ".o." + id + ".*" }

func (s *Store) eventSubject(id string, seq int64) string {
	return fmt.Sprintf("%s.e.%s.%020d", s.prefix, id, seq)
}

func (s *Store) pieceSubject(id string, off int64) string {
	return fmt.Sprintf("%s.o.%s.%020d", s.prefix, id, off)
}

// lastToken returns what follows the last '.' of subject.
func lastToken(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// validID reports whether id can be one subject token.
func validID(id string) bool {
	return id != "" && strings.IndexFunc(id, func(r rune) bool {
		return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r)
	}) < 0
}

func checkID(id string) error {
	if !validID(id) {
		return fmt.Errorf("%w %q", ErrInvalidID, id)
	}
	return nil
}

// checkPrefix refuses a subject prefix with an empty token, a wildcard or white
// space.
func checkPrefix(p string) error {
	for tok := range strings.SplitSeq(p, ".") {
		if !validID(tok) {
			return fmt.Errorf("jsstore: invalid subject prefix %q", p)
		}
	}
	return nil
}
