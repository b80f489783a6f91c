package main

import (
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/workflowcli"
	"github.com/spf13/cobra"
)

// newWorkflowCmd is `chiffon workflow` (package workflowcli), with this CLI's
// client flags, exit codes and ways of saying errors.
func newWorkflowCmd() *cobra.Command { return workflowcli.Command(workflowConfig()) }

// workflowConfig is what package workflowcli takes from this CLI.
func workflowConfig() workflowcli.Config {
	return workflowcli.Config{
		ClientFlags: func(cmd *cobra.Command) (func() (*client.Client, error), func() bool) {
			cf := &clientFlags{}
			cf.add(cmd)
			return cf.client, func() bool { return cf.jsonOut }
		},
		ParseParam:   parseKeyValue,
		PrintJSON:    printJSON,
		Usage:        usagef,
		Explain:      func(msg string, err error) error { return &explainedError{msg: msg, err: err} },
		Exit:         exitCode,
		TaskExitCode: taskExitCode,
		Codes:        workflowcli.ExitCodes{Cancelled: exitTaskCancelled, NotFinished: exitNotFinished, ParamError: exitParamError},
	}
}
