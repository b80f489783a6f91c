package main

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
)

// newSubmitCmd is `chiffon submit`.
func newSubmitCmd() *cobra.Command {
	var (
		cf                     clientFlags
		to, workType, paramsJS string
		params, hints          []string
		wait                   bool
	)
	cmd := &cobra.Command{
		Use:   "submit --to TYPE --work-type W [--param k=v]... [--wait]",
		Short: "Submit a task and print its id; with --wait, follow it to the end",
		Long: `Submits a task to the orchestrator and prints its id.

--param k=v sets a string parameter and --param k:=JSON any JSON value; --params-json
gives them all as one object. --hint takes max_duration_seconds, max_memory_mb and
agent_id (to pin the task to one agent).

With --wait it shows live progress (a bar on a terminal, plain lines into a pipe, JSON
lines with --json), prints the output, and exits with the task's exit code.

` + followExitCodes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := orchestrator.SubmitRequest{ToAgent: envelope.AgentType(to), WorkType: workType}
			var err error
			if req.Parameters, err = parseKeyValues(paramsJS, params); err != nil {
				return usagef("--param: " + err.Error())
			}
			if len(hints) > 0 {
				h, err := parseHints(hints)
				if err != nil {
					return usagef("--hint: " + err.Error())
				}
				req.Hints = &orchestrator.Hints{MaxDurationSeconds: h.MaxDurationSeconds, MaxMemoryMB: h.MaxMemoryMB, AgentID: h.AgentID}
			}
			if err := req.Validate(); err != nil {
				return usagef(err.Error())
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			task, err := c.Submit(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !wait {
				if cf.jsonOut {
					return printJSON(cmd.OutOrStdout(), task)
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), task.ID)
				return err
			}
			if !cf.jsonOut {
				fmt.Fprintln(cmd.ErrOrStderr(), "task", task.ID)
			}
			return followTask(cmd, c, task.ID, cf.jsonOut)
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "agent type: infra, desktop, code, research")
	f.StringVar(&workType, "work-type", "", "work type, such as run_playbook")
	f.StringArrayVar(&params, "param", nil, "parameter k=v (string) or k:=JSON; repeatable")
	f.StringVar(&paramsJS, "params-json", "", "parameters as one JSON object")
	f.StringArrayVar(&hints, "hint", nil, "hint k=v: max_duration_seconds, max_memory_mb, agent_id; repeatable")
	f.BoolVar(&wait, "wait", false, "follow the task to its end and exit with its exit code")
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagRequired("work-type")
	return cmd
}
