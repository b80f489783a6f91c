package taskview

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// BatchOutput shows the output of each task of a followed batch: from the
// moment the batch view shows the task made, its events (client.Events) give
// its output as it is streamed, placed by its offset so that nothing is lost or
// written twice, and once the task ended the whole output (client.Output) gives
// what the stream did not. Each agent's output goes, by lines prefixed with the
// agent's id, to one writer as it arrives, or with group is kept and written
// agent by agent at the end (flush).
type BatchOutput struct {
	c      *client.Client
	out    io.Writer
	group  bool
	mux    *lineMux
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	agents map[string]*agentOutput // by agent id
}

// agentOutput is one agent's task and the output of it written so far.
type agentOutput struct {
	agent, taskID string
	w             io.Writer // the prefixed writer, or buf with group
	buf           bytes.Buffer
	written       int64 // bytes of the task's output written to w
	task          *task.Task
}

// NewBatchOutput returns the output of a batch's tasks, written to out until
// ctx ends or stop is called.
func NewBatchOutput(ctx context.Context, c *client.Client, out io.Writer, group bool) *BatchOutput {
	o := &BatchOutput{c: c, out: out, group: group, mux: newLineMux(out), agents: map[string]*agentOutput{}}
	o.ctx, o.cancel = context.WithCancel(ctx)
	return o
}

// batch follows the output of each task of b made since the last call.
func (o *BatchOutput) Batch(b *api.Batch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range b.Targets {
		if !t.Started() || o.agents[t.AgentID] != nil {
			continue
		}
		ao := &agentOutput{agent: t.AgentID, taskID: t.TaskID}
		ao.w = &ao.buf
		if !o.group {
			ao.w = o.mux.source(t.AgentID)
		}
		o.agents[t.AgentID] = ao
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.follow(ao)
		}()
	}
}

// follow writes ao's task's output as it comes, until the task ended (then the
// rest of its output) or the follow is stopped.
func (o *BatchOutput) follow(ao *agentOutput) {
	defer func() {
		if pw, ok := ao.w.(*prefixWriter); ok {
			_ = pw.Close()
		}
	}()
	err := o.c.Events(o.ctx, ao.taskID, func(e *task.Event) error {
		if e.Type != task.EventStatus || e.Status == nil || e.OutputOffset == nil {
			return nil
		}
		if !ao.add(*e.OutputOffset, []byte(e.Status.Step.Output)) { // a gap: the whole output has it
			return o.rest(ao)
		}
		return nil
	})
	if err != nil {
		return
	}
	if err := o.rest(ao); err != nil {
		return
	}
	ao.task, _ = o.c.Get(o.ctx, ao.taskID)
}

// rest writes what ao's task's whole output holds past what was written.
func (o *BatchOutput) rest(ao *agentOutput) error {
	var whole bytes.Buffer
	if _, err := o.c.Output(o.ctx, ao.taskID, &whole); err != nil {
		return err
	}
	ao.add(0, whole.Bytes())
	return nil
}

// add writes the part of data, the output from offset off on, not written yet.
// It reports false, writing nothing, when data starts past what was written.
func (ao *agentOutput) add(off int64, data []byte) bool {
	if off > ao.written {
		return false
	}
	if end := off + int64(len(data)); end > ao.written {
		_, _ = ao.w.Write(data[ao.written-off:])
		ao.written = end
	}
	return true
}

// stop ends the follows and waits for them.
func (o *BatchOutput) Stop() {
	o.cancel()
	o.wg.Wait()
}

// BatchOutputWait bounds how long the output of a finished batch's tasks is
// still read: their streams end with the tasks, so only an orchestrator gone
// away meanwhile makes the CLI wait that long.
var BatchOutputWait = 3 * time.Second

// finish waits for the follows of the tasks of b, ended, at most for
// BatchOutputWait, then writes the grouped outputs (with group) and the table of
// b's agents, on tableTo, naming the outputs not read to their end.
func (o *BatchOutput) Finish(b *api.Batch, tableTo io.Writer) {
	o.Batch(b) // a task made and ended between two views
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(BatchOutputWait):
	}
	o.Stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.group {
		for _, t := range b.Targets {
			ao := o.agents[t.AgentID]
			if ao == nil {
				continue
			}
			fmt.Fprintf(o.out, "=== %s (%s)\n", t.AgentID, t.State)
			data := ao.buf.Bytes()
			_, _ = o.out.Write(data)
			if len(data) > 0 && data[len(data)-1] != '\n' {
				fmt.Fprintln(o.out)
			}
		}
	}
	tw := tabwriter.NewWriter(tableTo, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tEXIT\tDURATION")
	for _, t := range b.Targets {
		exit, took := "-", "-"
		ao := o.agents[t.AgentID]
		if ao != nil && ao.task != nil {
			exit, took = taskExitText(ao.task), taskDuration(ao.task)
		} else if ao != nil {
			defer fmt.Fprintf(tableTo, "chiffon: the output of %s was not read to its end: chiffon output %s\n", t.AgentID, ao.taskID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.AgentID, t.State, exit, took)
	}
	_ = tw.Flush()
}

// taskExitText is t's exit code, or "-" when it has none.
func taskExitText(t *task.Task) string {
	if t.Result == nil {
		return "-"
	}
	return fmt.Sprint(t.Result.ExitCode)
}

// taskDuration is how long t ran, from its first dispatch (else its making) to
// its end, or "-" while it has not ended.
func taskDuration(t *task.Task) string {
	if t.FinishedAt == nil {
		return "-"
	}
	from := t.CreatedAt
	if t.FirstDispatchAt != nil {
		from = *t.FirstDispatchAt
	}
	return t.FinishedAt.Sub(from).Round(time.Millisecond).String()
}
