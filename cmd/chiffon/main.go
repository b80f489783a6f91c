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

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command's RunE.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode wraps err so that main exits with code; a nil err exits silently.
func exitCode(code int, err error) error { return &exitError{code: code, err: err} }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "chiffon",
		Short:         "Run work across a homelab: an orchestrator hands typed work to agents over NATS",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
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
		newOutputCmd(),
		newWatchCmd(),
		newCancelCmd(),
		newAgentsCmd(),
		newBenchCmd(),
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and turns its error into an exit code: 2 for usage errors, the
// carried code for an exitError, 1 otherwise.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "chiffon:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "chiffon:", err)
	if isUsageError(err) {
		return 2
	}
	return 1
}
