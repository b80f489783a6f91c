package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// An agent with one custom work type, and an orchestrator that knows it and sends
// it a task, on an embedded NATS server.
func Example() {
	srv, _ := broker.StartServer(broker.ServerConfig{})
	defer srv.Shutdown()
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	nats := broker.NATSConfig{URLs: []string{srv.ClientURL()}}
	agentToken, orchToken := broker.NewToken(), broker.NewToken() // one pair per agent
	quiet := slog.New(slog.DiscardHandler)
	o, _ := orchestrator.Open(orchestrator.Config{NATS: nats, DataDir: filepath.Join(dir, "orch"), APIToken: broker.NewToken(),
		Agents: []policy.AgentConfig{{ID: "desk-1", Type: envelope.Desktop, Token: agentToken, OrchestratorToken: orchToken}},
	}, orchestrator.Options{Logger: quiet})
	defer o.Close()

	a, _ := agent.New(agent.Config{ID: "desk-1", Type: "desktop", NATS: nats, DataDir: filepath.Join(dir, "agent"),
		Token: agentToken, OrchestratorToken: orchToken, Logger: quiet})
	a.Handle("shout", func(ctx context.Context, req *agent.Request, p agent.Progress) (agent.Result, error) {
		p.Step("shouting")
		return agent.Result{Output: strings.ToUpper(fmt.Sprint(req.Parameters["text"]))}, nil
	})
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		defer stop()
		<-a.Ready() // the orchestrator has accepted the agent
		t, _ := o.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Desktop, WorkType: "shout",
			Parameters: map[string]any{"text": "hello"}})
		t, _ = o.Wait(ctx, t.ID)
		fmt.Println(a.WorkTypes(), t.State)
	}()
	_ = a.Run(ctx) // until ctx ends; then drains
	// Output: [echo shout sleep system_info] succeeded
}
