package stack_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/stack"
)

// A whole Chiffon in one process: an embedded broker, the orchestrator and one agent
// with a work type of its own, in a temporary data dir, with fresh tokens.
func Example() {
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Agents: []stack.Agent{{
		Config: agent.Config{ID: "desk-1", Type: "desktop"},
		Handlers: map[string]agent.Handler{
			"shout": func(_ context.Context, req *agent.Request, _ agent.Progress) (agent.Result, error) {
				return agent.Result{Output: strings.ToUpper(fmt.Sprint(req.Parameters["text"]))}, nil
			},
		},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop()

	o := s.Orchestrator()
	t, _ := o.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Desktop, WorkType: "shout",
		Parameters: map[string]any{"text": "hello"}})
	t, _ = o.Wait(ctx, t.ID)
	fmt.Println(s.AgentIDs(), t.State)
	// Output: [desk-1] succeeded
}
