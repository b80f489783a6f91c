package main

import "github.com/spf13/cobra"

// Placeholder until the agent command lands; replaced by the agent package's owner.
func newAgentCmd() *cobra.Command { return &cobra.Command{Use: "agent", Hidden: true} }
