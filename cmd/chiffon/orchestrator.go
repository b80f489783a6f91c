package main

import "github.com/spf13/cobra"

// Placeholder until the orchestrator command lands; replaced by its owner.
func newOrchestratorCmd() *cobra.Command { return &cobra.Command{Use: "orchestrator", Hidden: true} }
