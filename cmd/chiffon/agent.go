package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/internal/enrollcli"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// agentFlags are the settings a flag or an environment variable can override.
type agentFlags struct {
	config, id, typ, name, tokenFile, orchTokenFile, nkeyFile, dataDir string
	nats                                                               []string
	maxConcurrency                                                     int
}

// agentEnv maps each flag to its environment variable.
var agentEnv = map[string]string{
	"id": "CHIFFON_AGENT_ID", "type": "CHIFFON_AGENT_TYPE", "name": "CHIFFON_AGENT_NAME",
	"nats": "CHIFFON_NATS_URL", "token-file": "CHIFFON_TOKEN_FILE",
	"orchestrator-token-file": "CHIFFON_ORCHESTRATOR_TOKEN_FILE", "data-dir": "CHIFFON_DATA_DIR",
	"nkey-file": "CHIFFON_NKEY_FILE",
	"config":    "CHIFFON_AGENT_CONFIG",
}

// newAgentCmd is `chiffon agent`, the agent daemon (`chiffon agents` lists agents: agents.go).
func newAgentCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run an agent daemon: take typed work from the orchestrator over NATS",
		Long: `Run an agent daemon. Settings come from the YAML file given by --config (see
examples/agents/), then environment variables, then flags, each overriding the one
before. The first SIGTERM or SIGINT drains (running work finishes, up to the drain
timeout); a second one cancels running work at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			applyEnv(cmd.Flags(), agentEnv)
			cfg, err := f.merged()
			if err != nil {
				return err
			}
			cfg.Logger = newLogger(cmd.ErrOrStderr())
			a, err := agent.New(cfg)
			if err != nil {
				return usagef(err.Error())
			}
			return runAgent(cmd.Context(), a, cfg.Logger)
		},
	}
	f.register(cmd.Flags())
	cmd.AddCommand(enrollcli.JoinCommand(enrollConfig()), enrollcli.RevokeCommand(enrollConfig()))
	return cmd
}

// register defines the agent's flags on fl.
func (f *agentFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "YAML config file (env CHIFFON_AGENT_CONFIG)")
	fl.StringVar(&f.id, "id", "", "agent instance id (env CHIFFON_AGENT_ID)")
	fl.StringVar(&f.typ, "type", "", "agent type: infra, desktop, code, research (env CHIFFON_AGENT_TYPE)")
	fl.StringVar(&f.name, "name", "", "human-readable name (env CHIFFON_AGENT_NAME)")
	fl.StringSliceVar(&f.nats, "nats", nil, "NATS URL, repeatable or comma-separated (env CHIFFON_NATS_URL)")
	fl.StringVar(&f.tokenFile, "token-file", "", "this agent's token file (env CHIFFON_TOKEN_FILE)")
	fl.StringVar(&f.orchTokenFile, "orchestrator-token-file", "", "the orchestrator's token for this agent (env CHIFFON_ORCHESTRATOR_TOKEN_FILE)")
	fl.StringVar(&f.nkeyFile, "nkey-file", "", "NKey seed file of this agent's NATS identity (env CHIFFON_NKEY_FILE)")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory, holds the dedupe cache (env CHIFFON_DATA_DIR)")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "tasks run at once (default from config, else 4)")
}

// merged reads the file, if any, and lays the set flags over it.
func (f *agentFlags) merged() (agent.Config, error) {
	var cfg agent.Config
	if f.config != "" {
		var err error
		if cfg, err = agent.ReadConfig(f.config); err != nil {
			return cfg, usagef(err.Error())
		}
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{{&cfg.ID, f.id}, {&cfg.Type, f.typ}, {&cfg.Name, f.name}, {&cfg.TokenFile, f.tokenFile},
		{&cfg.OrchestratorTokenFile, f.orchTokenFile}, {&cfg.NATS.NKeyFile, f.nkeyFile}, {&cfg.DataDir, f.dataDir}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if len(f.nats) > 0 {
		cfg.NATS.URLs = nil
		for _, u := range f.nats {
			if u = strings.TrimSpace(u); u != "" {
				cfg.NATS.URLs = append(cfg.NATS.URLs, u)
			}
		}
	}
	if f.maxConcurrency > 0 {
		cfg.MaxConcurrency = f.maxConcurrency
	}
	return cfg, nil
}

// runAgent runs a until ctx ends (the first signal, through main), then lets it
// drain; a second SIGTERM or SIGINT makes it cancel running work at once. It tells
// systemd READY=1 once a is registered.
func runAgent(ctx context.Context, a *agent.Agent, log *slog.Logger) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
				cancel()
				if n > 0 {
					a.StopNow()
				}
			}
		}
	}()
	defer notifySystemd(ctx, log, a.Ready())()
	return a.Run(ctx)
}
