package broker

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig configures a client connection. The zero value (with URLs set) reconnects
// forever with backoff from 100 ms up to 5 s, and buffers 8 MiB while disconnected.
type ConnConfig struct {
	// URLs are the NATS servers to use; several give failover within a cluster.
	URLs []string
	// Name is the connection name shown by the server's monitoring.
	Name string
	// ReconnectBufSize is how many bytes of outgoing messages are kept while
	// disconnected; 0 means 8 MiB.
	ReconnectBufSize int
	// MinReconnectWait and MaxReconnectWait bound the reconnect backoff; 0 means
	// 100 ms and 5 s.
	MinReconnectWait, MaxReconnectWait time.Duration
	// OnReconnect runs after every reconnect, such as to register again.
	OnReconnect func(*nats.Conn)
	// OnDisconnect runs when the connection drops.
	OnDisconnect func(*nats.Conn, error)
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// Connect dials NATS. If no server answers yet it keeps trying in the background, so a
// daemon may start before its broker; publishes are buffered meanwhile.
func Connect(cfg ConnConfig) (*nats.Conn, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("broker: no NATS URL given")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	buf := cfg.ReconnectBufSize
	if buf == 0 {
		buf = 8 << 20
	}
	minWait, maxWait := cfg.MinReconnectWait, cfg.MaxReconnectWait
	if minWait == 0 {
		minWait = 100 * time.Millisecond
	}
	if maxWait == 0 {
		maxWait = 5 * time.Second
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(buf),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return reconnectDelay(attempts, minWait, maxWait)
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
			if cfg.OnDisconnect != nil {
				cfg.OnDisconnect(nc, err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			if cfg.OnReconnect != nil {
				cfg.OnReconnect(nc)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats async error", "subject", subject, "err", err)
		}),
	}
	return nats.Connect(strings.Join(cfg.URLs, ","), opts...)
}

// reconnectDelay doubles from min per attempt, capped at max.
func reconnectDelay(attempts int, min, max time.Duration) time.Duration {
	d := min
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return time.Duration(min64(int64(d), int64(max)))
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
