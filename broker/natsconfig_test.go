package broker_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nkeys"
)

// credsFile writes a .creds file in the layout nsc writes, with a stand-in JWT.
func credsFile(t *testing.T, dir string, seed []byte) string {
	t.Helper()
	p := filepath.Join(dir, "user.creds")
	content := "-----BEGIN NATS USER JWT-----\neyJhbGciOiJlZDI1NTE5In0.eyJzdWIiOiJVIn0.c2ln\n------END NATS USER JWT------\n\n" +
		"************************* IMPORTANT *************************\n\n" +
		"-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n"
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNATSConfigValidateNamesTheKey runs Validate over broken identity and TLS
// settings: each error names the YAML key at fault and never a seed.
func TestNATSConfigValidateNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "u.nk")
	if _, err := broker.EnsureNKeySeed(seedFile); err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	creds := credsFile(t, dir, userSeed)
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	accountFile := filepath.Join(dir, "a.nk")
	os.WriteFile(accountFile, accountSeed, 0o600)
	noJWT := filepath.Join(dir, "nojwt.creds")
	os.WriteFile(noJWT, append([]byte("garbage\n"), userSeed...), 0o600)
	caPath, _, _ := broker.EnsureCA(dir)
	certPath, keyPath, _ := broker.EnsureClientCert(dir, "c")
	absent := filepath.Join(dir, "absent")

	for _, tc := range []struct {
		name string
		cfg  broker.NATSConfig
		want string // "" means valid
	}{
		{"nothing", broker.NATSConfig{}, ""},
		{"nkey and mutual TLS", broker.NATSConfig{NKeyFile: seedFile, TLS: broker.ClientTLS{CAFile: caPath, CertFile: certPath, KeyFile: keyPath}}, ""},
		{"creds", broker.NATSConfig{CredsFile: creds}, ""},
		{"both", broker.NATSConfig{NKeyFile: seedFile, CredsFile: creds}, "nats.nkey_file and nats.creds_file: set only one"},
		{"missing seed", broker.NATSConfig{NKeyFile: absent}, "nats.nkey_file: "},
		{"account seed", broker.NATSConfig{NKeyFile: accountFile}, "nats.nkey_file: "},
		{"missing creds", broker.NATSConfig{CredsFile: absent}, "nats.creds_file: "},
		{"creds without JWT", broker.NATSConfig{CredsFile: noJWT}, "nats.creds_file: "},
		{"seed as creds", broker.NATSConfig{CredsFile: seedFile}, "nats.creds_file: "},
		{"cert without key", broker.NATSConfig{TLS: broker.ClientTLS{CertFile: certPath}}, "nats.tls.cert_file and nats.tls.key_file"},
		{"key that is no key", broker.NATSConfig{TLS: broker.ClientTLS{CertFile: certPath, KeyFile: caPath}}, "nats.tls.cert_file, nats.tls.key_file"},
		{"CA with no certificate", broker.NATSConfig{TLS: broker.ClientTLS{CAFile: seedFile}}, "nats.tls.ca_file: "},
		{"missing CA", broker.NATSConfig{TLS: broker.ClientTLS{CAFile: absent}}, "nats.tls.ca_file: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
			seed, _ := os.ReadFile(seedFile)
			for _, secret := range [][]byte{seed, userSeed, accountSeed} {
				if strings.Contains(err.Error(), strings.TrimSpace(string(secret))[:12]) {
					t.Fatalf("error holds a seed: %v", err)
				}
			}
		})
	}
}

func TestNATSConfigConnConfigCopiesTheIdentity(t *testing.T) {
	n := broker.NATSConfig{URLs: []string{"nats://a:4222"}, Prefix: "lab", NKeyFile: "/k.nk", CredsFile: "/c.creds",
		TLS: broker.ClientTLS{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/c-key.pem", ServerName: "n"}}
	got := n.ConnConfig("chiffon-agent-a")
	want := broker.ConnConfig{URLs: n.URLs, Name: "chiffon-agent-a", NKeyFile: n.NKeyFile, CredsFile: n.CredsFile, TLS: n.TLS}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
