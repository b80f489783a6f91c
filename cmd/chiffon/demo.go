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

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/cobra"
)

// demoTasks is one real task per agent type.
var demoTasks = []api.SubmitRequest{
	{ToAgent: envelope.Infra, WorkType: "sleep", Parameters: map[string]any{"seconds": 2}},
	{ToAgent: envelope.Desktop, WorkType: "system_info"},
	{ToAgent: envelope.Code, WorkType: "echo", Parameters: map[string]any{"message": "hello from the code agent"}},
	{ToAgent: envelope.Research, WorkType: "run_command", Parameters: map[string]any{"command": "df", "args": []any{"/"}}},
}

// newDemoCmd is `chiffon demo`.
func newDemoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a whole Chiffon in a temp dir, run a real task on each agent type, show the results",
		Long: `Starts a whole Chiffon in a temp dir, runs a real task on each agent type and shows
the results. The temp dir (logs, stores) is removed afterwards, unless --keep is given
or the demo failed: then it is kept and its path printed. With --keep the stack also
keeps running after the tasks, until interrupted, so that the tasks can be looked at
in the dashboard it prints the address of.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demo(cmd.Context(), cmd.OutOrStdout(), demoTasks, keep)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the stack running after the tasks, until interrupted, and the temp dir afterwards")
	return cmd
}

// demo runs tasks on a stack in a new temp dir, then removes the dir, or keeps it
// when asked or when the demo failed (not when it was interrupted) and says where.
func demo(ctx context.Context, out io.Writer, tasks []api.SubmitRequest, keep bool) error {
	dir, err := os.MkdirTemp("", "chiffon-demo-")
	if err != nil {
		return err
	}
	err = runDemo(ctx, dir, tasks, out, keep)
	switch logPath := filepath.Join(dir, demoLog); {
	case keep:
		fmt.Fprintf(out, "Kept %s (logs in %s)\n", dir, logPath)
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(out, "Kept %s to look into (logs in %s)\n", dir, logPath)
	default:
		if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
			err = rmErr
		}
	}
	return err
}

// demoLog is the log file in the demo's dir.
const demoLog = "chiffon.log"

func runDemo(ctx context.Context, dir string, tasks []api.SubmitRequest, out io.Writer, keep bool) error {
	logFile, err := os.OpenFile(filepath.Join(dir, demoLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	start := time.Now()
	sc, err := localStack(localConfig{DataDir: dir, Host: "127.0.0.1", Log: newLogger(logFile)})
	if err != nil {
		return err
	}
	s, err := stack.Start(ctx, sc)
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Fprintf(out, "Chiffon demo: broker %s, API %s, %d agents\n\n", s.NATSURL(), s.APIURL(), len(s.AgentIDs()))
	c := &client.Client{BaseURL: s.APIURL(), Token: s.APIToken()}
	running := ctx
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	p := &demoPrinter{w: out}
	results := make([]*task.Task, len(tasks))
	var wg sync.WaitGroup
	for i, req := range tasks {
		t, err := c.Submit(ctx, req)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("submit %s to %s: %w", req.WorkType, req.ToAgent, err)
		}
		p.line(req.ToAgent, "submitted %s as task %s", req.WorkType, t.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.follow(ctx, c, t)
		}()
	}
	wg.Wait()

	fmt.Fprintln(out)
	failed := 0
	for i, t := range results {
		req := tasks[i]
		if t == nil || t.State != task.StateSucceeded {
			failed++
		}
		printDemoResult(ctx, out, c, req, t)
	}
	fmt.Fprintf(out, "%d of %d tasks succeeded in %s\n", len(results)-failed, len(results), time.Since(start).Round(time.Millisecond))
	if keep {
		fmt.Fprintf(out, "The stack keeps running: see the tasks at %s/ and sign in with the token in %s (a viewer's: %s)\n",
			s.APIURL(), filepath.Join(dir, "secrets", site.APIToken), filepath.Join(dir, "secrets", site.ViewerToken))
		fmt.Fprintln(out, "Press Ctrl-C to stop.")
		<-running.Done()
	}
	if failed > 0 {
		return exitCode(1, fmt.Errorf("%d of %d demo tasks did not succeed", failed, len(tasks)))
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
func (p *demoPrinter) follow(ctx context.Context, c *client.Client, t *task.Task) *task.Task {
	var st taskview.State
	err := c.Events(ctx, t.ID, func(e *task.Event) error {
		if st.Apply(e) {
			p.line(t.ToAgent, "%-10s %3d%%  %s", st.State, st.Percent, st.Step)
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

func printDemoResult(ctx context.Context, w io.Writer, c *client.Client, req api.SubmitRequest, t *task.Task) {
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
