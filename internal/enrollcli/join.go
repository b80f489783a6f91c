package enrollcli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"
)

// joinFlags are `chiffon agent join`'s flags.
type joinFlags struct {
	orchestrator, fingerprint, id string
	joined                        site.Joined
}

// JoinCommand is `chiffon agent join`.
func JoinCommand(cfg Config) *cobra.Command {
	var f joinFlags
	cmd := &cobra.Command{
		Use:   "join --orchestrator URL --ca-fingerprint SHA256 CODE",
		Short: "Join this host to a site as the agent a one-time code was made for",
		Long: `Joins this host with a code from chiffon enroll. It makes the host's NATS key here
(the seed never leaves the host), checks that the orchestrator's certificate comes
from the CA of --ca-fingerprint before it sends anything, sends the public key with
the code, and writes what it gets back under --dir: agent.yaml, and in secrets/
(0700) the agent's .creds, its token pair and the site CA, each 0600. Then run
chiffon agent --config DIR/agent.yaml. A refused join writes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, cfg, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.orchestrator, "orchestrator", "", "the orchestrator's API URL, https:// (required)")
	fl.StringVar(&f.fingerprint, "ca-fingerprint", "", "the site CA's SHA-256 fingerprint, as chiffon enroll printed it (required)")
	fl.StringVar(&f.id, "id", "", "the agent id this host expects the code to be for; refused if it is for another")
	fl.StringVar(&f.joined.Dir, "dir", "/etc/chiffon", "where to write agent.yaml and secrets/")
	fl.StringVar(&f.joined.DataDir, "data-dir", "", "the agent's data dir (its dedupe cache); default: DIR/data")
	fl.BoolVar(&f.joined.Force, "force", false, "replace the files of an earlier join")
	_ = cmd.MarkFlagRequired("orchestrator")
	_ = cmd.MarkFlagRequired("ca-fingerprint")
	return cmd
}

// run joins: every check that needs no network first, then the join, then
// the files.
func (f *joinFlags) run(cmd *cobra.Command, cfg Config, code string) error {
	ca, err := api.ParseFingerprint(f.fingerprint)
	if err != nil {
		return cfg.Usage("--ca-fingerprint: " + err.Error())
	}
	if f.joined.DataDir == "" {
		f.joined.DataDir = filepath.Join(f.joined.Dir, "data")
	}
	if err := f.joined.Check(f.id); err != nil {
		return err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	g, err := client.Join(ctx, f.orchestrator, ca, api.JoinRequest{Code: code, AgentID: f.id, PublicKey: pub})
	if err != nil {
		return fmt.Errorf("join refused: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return err
	}
	defer clear(seed)
	path, err := f.joined.Write(g, seed)
	if err != nil {
		return fmt.Errorf("joined as agent %s, but writing its files failed (revoke it and enroll again): %w", g.AgentID, err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "joined as agent %s (%s); start it with:\n  chiffon agent --config %s\n", g.AgentID, g.Type, path)
	return err
}
