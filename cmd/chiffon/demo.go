package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
)

// demoTasks is one real task per agent type.
var demoTasks = []orchestrator.SubmitRequest{
	{ToAgent: envelope.Infra, WorkType: "sleep", Parameters: map[string]any{"seconds": 2}},
	{ToAgent: envelope.Desktop, WorkType: "system_info"},
	{ToAgent: envelope.Code, WorkType: "echo", Parameters: map[string]any{"message": "hello from the code agent"}},
	{ToAgent: envelope.Research, WorkType: "run_command", Parameters: map[string]any{"command": "df", "args": []any{"/"}}},
}

func newDemoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a whole Chiffon in a temp dir, run a real task on each agent type, show the results",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "chiffon-demo-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			return runDemo(cmd.Context(), dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temp dir (logs, stores) afterwards")
	return cmd
}

func runDemo(ctx context.Context, dir string, out io.Writer) error {
	logPath := filepath.Join(dir, "chiffon.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	start := time.Now()
	s, err := startStack(stackConfig{DataDir: dir, Host: "127.0.0.1", Log: newLogger(logFile)})
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Fprintf(out, "Chiffon demo: broker %s, API %s, %d agents (logs in %s)\n\n", s.NATSURL, s.APIURL, len(s.Agents), logPath)

	c := &orchestrator.Client{BaseURL: s.APIURL, Token: s.APIToken}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	p := &demoPrinter{w: out}
	tasks := make([]*orchestrator.Task, len(demoTasks))
	var wg sync.WaitGroup
	for i, req := range demoTasks {
		t, err := c.Submit(ctx, req)
		if err != nil {
			return fmt.Errorf("submit %s to %s: %w", req.WorkType, req.ToAgent, err)
		}
		p.line(req.ToAgent, "submitted %s as task %s", req.WorkType, t.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks[i] = p.follow(ctx, c, t)
		}()
	}
	wg.Wait()

	fmt.Fprintln(out)
	failed := 0
	for i, t := range tasks {
		req := demoTasks[i]
		if t == nil || t.State != orchestrator.StateSucceeded {
			failed++
		}
		printDemoResult(ctx, out, c, req, t)
	}
	fmt.Fprintf(out, "%d of %d tasks succeeded in %s\n", len(tasks)-failed, len(tasks), time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		return exitCode(1, fmt.Errorf("%d demo tasks did not succeed; see %s", failed, logPath))
	}
	return nil
}

// demoPrinter interleaves the progress lines of several tasks.
type demoPrinter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *demoPrinter) line(t envelope.AgentType, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "  %-9s %s\n", "["+string(t)+"]", fmt.Sprintf(format, args...))
}

// follow prints a task's progress until it ends and returns the finished task, or nil
// when it could not be followed.
func (p *demoPrinter) follow(ctx context.Context, c *orchestrator.Client, t *orchestrator.Task) *orchestrator.Task {
	var st progressState
	err := c.Events(ctx, t.ID, func(e *orchestrator.Event) error {
		if st.apply(e) {
			p.line(t.ToAgent, "%-10s %3d%%  %s", st.state, st.percent, st.step)
		}
		return nil
	})
	if err != nil {
		p.line(t.ToAgent, "lost the task's events: %v", err)
		return nil
	}
	final, err := c.Get(ctx, t.ID)
	if err != nil {
		p.line(t.ToAgent, "could not read the task: %v", err)
		return nil
	}
	return final
}

func printDemoResult(ctx context.Context, w io.Writer, c *orchestrator.Client, req orchestrator.SubmitRequest, t *orchestrator.Task) {
	if t == nil {
		fmt.Fprintf(w, "── %s %s: no result\n\n", req.ToAgent, req.WorkType)
		return
	}
	fmt.Fprintf(w, "── %s %s: %s\n", req.ToAgent, req.WorkType, summary(t))
	var buf bytes.Buffer
	if _, err := c.Output(ctx, t.ID, &buf); err != nil {
		fmt.Fprintf(w, "   (output unavailable: %v)\n\n", err)
		return
	}
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		fmt.Fprintf(w, "   %s\n", l)
	}
	fmt.Fprintln(w)
}
