// Package workflowcli is `chiffon workflow`: the commands that list, show,
// store and delete workflows, start and follow their runs, cancel them and
// answer their gates. It holds no CLI plumbing of its own: how to reach the
// API, the exit codes and how errors are said come from package main
// (Config), so that these commands behave as the others do.
package workflowcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/workflow"
	"github.com/spf13/cobra"
)

// Config is what the workflow commands take from the CLI around them.
type Config struct {
	// ClientFlags defines on cmd the flags that say where the API is and how
	// to reach it, and --json; it is called once cmd's RunE is set, which it
	// may wrap. It returns how to make the client the flags name, and whether
	// --json was given.
	ClientFlags func(cmd *cobra.Command) (newClient func() (*client.Client, error), jsonOut func() bool)
	// ParseParam reads one --param: k=v (text: typed by the workflow's
	// declared type) or k:=JSON (any value).
	ParseParam func(kv string) (k string, v any, text bool, err error)
	// PrintJSON writes v as the CLI's --json prints.
	PrintJSON func(w io.Writer, v any) error
	// Usage is a usage error: the CLI exits 2.
	Usage func(msg string) error
	// Explain says err, an API error, as msg; --json still reports the API's
	// error.
	Explain func(msg string, err error) error
	// Exit wraps err so that the CLI exits with code; a nil err exits
	// without a word.
	Exit func(code int, err error) error
	// TaskExitCode is the exit code of a finished task, as submit --wait
	// exits with it: a failed run exits as its failed step's task.
	TaskExitCode func(*task.Task) int
	// Codes are the exit codes the commands share with the others.
	Codes ExitCodes
}

// ExitCodes are the CLI's exit codes the workflow commands use besides 0, 1
// and a failed task's.
type ExitCodes struct {
	// Cancelled: the run followed was cancelled, as a task cancelled.
	Cancelled int
	// NotFinished: the wait stopped before the run's end.
	NotFinished int
	// ParamError: a --param the workflow refuses; nothing was started.
	ParamError int
}

// Command is `chiffon workflow` and its subcommands.
func Command(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Workflows: steps (tasks, batches, approval gates) that wait on steps, and their runs",
		Long: `A workflow is named steps, each a task, a batch or an approval gate, with the steps each
needs (and whether it needs their success, their failure, or only their end). A run
starts each step once what it needs has ended, hands one step's structured output to
the next through ${steps.NAME.output...} templates, and ends succeeded, failed or
cancelled. Workflows come from the orchestrator's config (read-only here) or are
stored with 'workflow apply'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(cfg.listCmd(), cfg.showCmd(), cfg.applyCmd(), cfg.deleteCmd(), cfg.runCmd(), cfg.runsCmd(),
		cfg.cancelCmd(), cfg.decideCmd(true), cfg.decideCmd(false))
	return cmd
}

// command is a subcommand whose RunE gets the API's client and whether
// --json was given.
func (cfg Config) command(cmd *cobra.Command, run func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error) *cobra.Command {
	var newClient func() (*client.Client, error)
	var jsonOut func() bool
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := newClient()
		if err != nil {
			return err
		}
		return run(cmd, args, c, jsonOut())
	}
	newClient, jsonOut = cfg.ClientFlags(cmd)
	return cmd
}

// status is the HTTP status of the API's answer err, or 0.
func status(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// noWorkflow says a 404 as no workflow of that name, and a 409 as a
// workflow of the config.
func (cfg Config) noWorkflow(err error, name string) error {
	switch status(err) {
	case http.StatusNotFound:
		return cfg.Explain(fmt.Sprintf("no workflow named %q (HTTP 404)", name), err)
	case http.StatusConflict:
		return cfg.Explain(fmt.Sprintf("workflow %s is defined in the orchestrator's config: change it there (HTTP 409)", name), err)
	}
	return err
}

// noRun says a 404 as no run of that id.
func (cfg Config) noRun(err error, id string) error {
	if status(err) == http.StatusNotFound {
		return cfg.Explain(fmt.Sprintf("no workflow run %s (HTTP 404)", id), err)
	}
	return err
}

// typedParams reads the --param pairs of a run of w: each k=v typed by the
// parameter's declared type, each k:=JSON as JSON, all checked against w's
// parameters as the orchestrator checks them, the required ones given. A
// malformed pair is a usage error; a value or a name w refuses, or a
// required one left out, exits ParamError. Only the given ones are returned:
// the orchestrator fills in the defaults.
func (cfg Config) typedParams(w *api.WorkflowSpec, pairs []string) (map[string]any, error) {
	given := map[string]any{}
	for _, kv := range pairs {
		k, v, _, err := cfg.ParseParam(kv)
		if err != nil {
			return nil, cfg.Usage("--param: " + err.Error())
		}
		given[k] = v
	}
	// The given ones first, each typed (RunParams looks at them in no order),
	// then the required ones.
	optional := *w
	optional.Params = map[string]api.WorkflowParam{}
	for name, p := range w.Params {
		p.Required, p.Default = false, nil
		optional.Params[name] = p
	}
	typed, err := workflow.RunParams(&optional, given)
	if err == nil {
		_, err = workflow.RunParams(w, typed)
	}
	var fe *api.FieldError
	if errors.As(err, &fe) {
		// Found here, said as the orchestrator would say it (--json too).
		said := &client.APIError{APIErrorDetail: api.APIErrorDetail{Code: "invalid_field", Field: fe.Field, Message: fe.Message}}
		name, _ := strings.CutPrefix(fe.Field, "params.")
		return nil, cfg.Exit(cfg.Codes.ParamError, cfg.Explain(fmt.Sprintf("--param %s: %s", name, fe.Message), said))
	}
	if err != nil || len(typed) == 0 {
		return nil, err
	}
	return typed, nil
}

// explainParams says the orchestrator's refusal of a run's parameters (400
// on params.NAME), exiting ParamError.
func (cfg Config) explainParams(err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return err
	}
	if name, ok := strings.CutPrefix(ae.Field, "params."); ok {
		return cfg.Exit(cfg.Codes.ParamError, cfg.Explain(fmt.Sprintf("--param %s: %s (HTTP 400)", name, ae.Message), err))
	}
	return err
}

// ScheduleWorkflow is the run a schedule of workflow name starts, with the
// --param pairs typed as a run's are (see `workflow run`); `schedule add
// --workflow` uses it.
func (cfg Config) ScheduleWorkflow(ctx context.Context, c *client.Client, name string, pairs []string) (*api.ScheduleWorkflow, error) {
	w, err := c.Workflow(ctx, name)
	if err != nil {
		return nil, cfg.noWorkflow(err, name)
	}
	params, err := cfg.typedParams(&w.WorkflowSpec, pairs)
	if err != nil {
		return nil, err
	}
	return &api.ScheduleWorkflow{Name: name, Params: params}, nil
}
