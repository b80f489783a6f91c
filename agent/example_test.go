package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
)

// An agent with one custom work type, on an embedded NATS server.
func Example() {
	srv, _ := broker.StartServer(broker.ServerConfig{})
	defer srv.Shutdown()
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	a, err := agent.New(agent.Config{ID: "desk-1", Type: "desktop", NATS: broker.NATSConfig{URLs: []string{srv.ClientURL()}},
		DataDir: dir, Token: broker.NewToken(), OrchestratorToken: broker.NewToken()})
	if err != nil {
		panic(err)
	}
	a.Handle("shout", func(ctx context.Context, req *agent.Request, p agent.Progress) (agent.Result, error) {
		p.Step("shouting")
		return agent.Result{Output: strings.ToUpper(fmt.Sprint(req.Parameters["text"]))}, nil
	})
	ctx, stop := context.WithCancel(context.Background())
	go func() { <-a.Ready(); fmt.Println(a.WorkTypes()); stop() }()
	_ = a.Run(ctx) // until ctx ends; then drains
	// Output: [echo shout sleep system_info]
}
