package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/ui"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// orchFlags are the settings a flag or an environment variable can override.
type orchFlags struct {
	config, id, nkeyFile, apiTokenFile, listen, dataDir string
	nats                                                []string
}

// orchEnv maps each flag to its environment variable.
var orchEnv = map[string]string{
	"config": "CHIFFON_ORCHESTRATOR_CONFIG", "id": "CHIFFON_ORCH_ID", "nats": "CHIFFON_NATS_URL",
	"nkey-file": "CHIFFON_NKEY_FILE", "api-token-file": "CHIFFON_API_TOKEN_FILE",
	"listen": "CHIFFON_LISTEN", "data-dir": "CHIFFON_DATA_DIR",
}

// newOrchestratorCmd is `chiffon orchestrator`, the orchestrator daemon.
func newOrchestratorCmd() *cobra.Command {
	var f orchFlags
	cmd := &cobra.Command{
		Use:   "orchestrator",
		Short: "Run the orchestrator daemon: route work to agents, keep every task, serve the HTTP API",
		Long: `Run the orchestrator daemon. Settings come from the YAML file given by --config
(see examples/orchestrator.yaml), then environment variables, then flags, each
overriding the one before. It runs until SIGINT or SIGTERM; unfinished tasks stay in
the store and resume at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			applyEnv(cmd.Flags(), orchEnv)
			cfg, err := f.merged(cmd.Flags())
			if err != nil {
				return usagef(err.Error())
			}
			log := newLogger(cmd.ErrOrStderr())
			o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: log, Pages: ui.Pages(cfg.HTTP.TLS.Enabled(), log)})
			if err != nil {
				return err
			}
			log.Info("orchestrator running", "orch_id", o.ID(), "http", cfg.HTTP.Listen)
			serve := o.Run // with no API to listen on
			if cfg.HTTP.Listen != "" {
				// Listen here, so systemd hears READY=1 only once the API takes connections.
				ln, err := net.Listen("tcp", cfg.HTTP.Listen)
				if err != nil {
					return errors.Join(fmt.Errorf("http listen: %w", err), o.Close())
				}
				serve = func(ctx context.Context) error { return o.Serve(ctx, ln) }
			}
			stopNotify := notifySystemd(cmd.Context(), log, nil)
			runErr := serve(cmd.Context())
			stopNotify()
			return errors.Join(runErr, o.Close())
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register defines the orchestrator's flags on fl.
func (f *orchFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "YAML config file (env CHIFFON_ORCHESTRATOR_CONFIG)")
	fl.StringVar(&f.id, "id", "", "orch_id; default: the one kept in the data dir (env CHIFFON_ORCH_ID)")
	fl.StringSliceVar(&f.nats, "nats", nil, "NATS URL, repeatable or comma-separated (env CHIFFON_NATS_URL)")
	fl.StringVar(&f.nkeyFile, "nkey-file", "", "NKey seed file of the orchestrator's NATS identity (env CHIFFON_NKEY_FILE)")
	fl.StringVar(&f.apiTokenFile, "api-token-file", "", "HTTP API token file (env CHIFFON_API_TOKEN_FILE)")
	fl.StringVar(&f.listen, "listen", "", "HTTP API address, such as 127.0.0.1:8080 (env CHIFFON_LISTEN)")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory, holds orch_id and the task store (env CHIFFON_DATA_DIR)")
}

// merged reads the file, if any, lays the set flags over it and validates the result.
func (f *orchFlags) merged(fl *pflag.FlagSet) (orchestrator.Config, error) {
	var cfg orchestrator.Config
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return cfg, err
		}
		if cfg, err = orchestrator.DecodeConfig(b); err != nil {
			return cfg, err
		}
	}
	set := func(name string, dst *string, v string) {
		if fl.Changed(name) {
			*dst = v
		}
	}
	set("id", &cfg.ID, f.id)
	set("nkey-file", &cfg.NATS.NKeyFile, f.nkeyFile)
	set("api-token-file", &cfg.APITokenFile, f.apiTokenFile)
	set("listen", &cfg.HTTP.Listen, f.listen)
	set("data-dir", &cfg.DataDir, f.dataDir)
	if fl.Changed("nats") {
		cfg.NATS.URLs = f.nats
	}
	if len(cfg.NATS.URLs) == 0 {
		return cfg, errors.New("config: nats.urls: is required (or --nats)")
	}
	return cfg, cfg.Validate()
}
