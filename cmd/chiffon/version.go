package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what the binary knows of its build: the module version, and the VCS
// revision and commit time when it was built from a checkout.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// readBuildInfo reads the build info of the running binary; a binary without one
// (rare: built without module support) says "unknown".
func readBuildInfo(read func() (*debug.BuildInfo, bool)) buildInfo {
	b := buildInfo{Version: "unknown", GoVersion: runtime.Version()}
	bi, ok := read()
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `chiffon version` prints.
func (b buildInfo) String() string {
	s := b.Version
	if b.Revision != "" {
		s += " (" + b.Revision
		if b.Time != "" {
			s += " " + b.Time
		}
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + b.GoVersion
}

func newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version the binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := readBuildInfo(debug.ReadBuildInfo)
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "chiffon", b)
			return err
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
