// Command chiffon is Chiffon's one binary: the broker, the orchestrator, the agents and
// the operator's CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // schedules' time zones (--tz) on hosts without a zoneinfo database

	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/chiffon-dev/chiffon/internal/enrollcli"
	"github.com/spf13/cobra"
)

// newRootCmd is the chiffon command. Each subcommand is in the file of its name
// (up.go is `chiffon up`, agents.go `chiffon agents`); what several commands share is
// in a file named for what it holds, such as client.go, follow.go or format.go.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "chiffon",
		Short:         "Run work across a homelab: an orchestrator hands typed work to agents over NATS",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}
	root.SetVersionTemplate("chiffon {{.Version}}\n")
	addLogFlags(root)
	root.AddCommand(
		newEnvelopeCmd(),
		newBrokerCmd(),
		newAgentCmd(),
		newOrchestratorCmd(),
		newTokenCmd(),
		newInitCmd(),
		newConfigCmd(),
		newHealthcheckCmd(),
		newUpCmd(),
		newDemoCmd(),
		newSubmitCmd(),
		newTasksCmd(),
		newTaskCmd(),
		newBatchesCmd(),
		newBatchCmd(),
		newScheduleCmd(),
		newWorkflowCmd(),
		newOutputCmd(),
		newWatchCmd(),
		newCancelCmd(),
		newDecideCmd(true),
		newDecideCmd(false),
		newAgentsCmd(),
		enrollcli.EnrollCommand(enrollConfig()),
		enrollcli.EnrollmentsCommand(enrollConfig()),
		newWorkTypesCmd(),
		newWebhooksCmd(),
		newBenchCmd(),
		newVersionCmd(),
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and turns its error into an exit code: 2 for usage errors, the
// carried code for an exitError, 1 otherwise. A command run with --json reports its
// error as JSON on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code, err = ee.code, ee.err
	case isUsageError(err):
		code = 2
	}
	if err == nil {
		return code
	}
	if wantsJSON(cmd, args) {
		writeErrorJSON(stderr, err, code)
	} else {
		fmt.Fprintln(stderr, "chiffon:", err)
	}
	return code
}
