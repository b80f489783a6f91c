package main

import "github.com/spf13/cobra"

// newWatchCmd is `chiffon watch ID`.
func newWatchCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a task's progress to its end, print its output, exit with its exit code",
		Long: `Follows a task's progress to its end (a bar on a terminal, plain lines into a pipe,
JSON lines with --json), prints its output as it comes (whole lines, above the bar on
a terminal; each byte once, in order, also when the event stream is resumed; what
the events did not carry is read at the end) and exits with its exit code. An output
whose last line has no newline is ended before the summary when both go to one place.

` + followExitCodes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			return followTask(cmd, c, args[0], cf.jsonOut)
		},
	}
	cf.add(cmd)
	return cmd
}
