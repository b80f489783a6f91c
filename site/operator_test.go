package site

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
)

// TestOperatorClusterGivesEachNodeItsOwnResolverDir: in operator mode every
// node of a cluster has the operator block, no users, and a resolver dir of
// its own beside its JetStream store; a second write keeps the account's JWT
// (a JWT signed anew would replace the servers' revocations at their restart)
// and every identity's key.
func TestOperatorClusterGivesEachNodeItsOwnResolverDir(t *testing.T) {
	dir := t.TempDir()
	write := func() (*Layout, *Secrets) {
		l, err := group(2, func(o *Options) { o.Dir, o.Operator, o.Force = dir, true, true }).Layout()
		if err != nil {
			t.Fatal(err)
		}
		st, err := l.Write()
		if err != nil {
			t.Fatal(err)
		}
		return l, st
	}
	l, st := write()
	var dirs []string
	for _, n := range l.Nodes {
		f := st.nodeFile(n, l.SecretsDir, l.DataRoot)
		if f.Operator == nil || f.Users != nil {
			t.Fatalf("%s: operator %v, %d users", n.Name, f.Operator != nil, len(f.Users))
		}
		if filepath.Dir(f.Operator.ResolverDir) != filepath.Dir(f.StoreDir) || slices.Contains(dirs, f.Operator.ResolverDir) {
			t.Errorf("%s: resolver dir %s, store %s, others %v", n.Name, f.Operator.ResolverDir, f.StoreDir, dirs)
		}
		dirs = append(dirs, f.Operator.ResolverDir)
	}
	conf, _ := os.ReadFile(filepath.Join(dir, "broker-2.conf"))
	if !strings.Contains(string(conf), "resolver {") || strings.Contains(string(conf), "nkey:") {
		t.Errorf("broker-2.conf:\n%s", conf)
	}
	account := st.operator.AccountJWT
	_, st2 := write()
	if st2.operator.AccountJWT != account || st2.nkeys["agent-code-1.creds"] != st.nkeys["agent-code-1.creds"] {
		t.Error("a second write signed the account anew, or gave an identity a new key")
	}
	for _, h := range st.HostFiles() {
		for _, secret := range []string{natsjwt.OperatorSeed, natsjwt.AccountSeed, natsjwt.SystemAccountSeed} {
			if slices.Contains(h.Files, secret) {
				t.Errorf("%s holds %s", h.Host, secret)
			}
		}
		if strings.HasPrefix(h.Host, "orchestrator-") && !slices.Contains(h.Files, natsjwt.OperatorSignerSeed) {
			t.Errorf("%s lacks the operator's signing key: %v", h.Host, h.Files)
		}
	}
	if c := st.NATSConfig(broker.Identity{Role: broker.RoleAgent, Name: "code-1"}, nil, "/s"); c.NKeyFile != "" || c.CredsFile != "/s/agent-code-1.creds" {
		t.Errorf("agent's nats section %+v", c)
	}
}
