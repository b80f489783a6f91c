package ratelog_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/chiffon-dev/chiffon/internal/ratelog"
)

func Example() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "since" {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	authLog := ratelog.New(log, ratelog.Policy{}) // one line per key per second
	for range 3 {
		authLog.Warn("nats", "message refused: bad token", "agent_id", "code-1")
	}
	authLog.Flush(context.Background()) // from a ticker the daemon has, and at shutdown
	// Output:
	// level=WARN msg="message refused: bad token" agent_id=code-1
	// level=WARN msg="2 similar messages suppressed" key=nats suppressed=2 last_message="message refused: bad token"
}
