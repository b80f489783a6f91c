package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nkeys"
)

func TestEnsureNKeySeedCreatesAPrivateUserSeedAndKeepsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "agent.nk")
	pub, err := broker.EnsureNKeySeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		t.Fatalf("public key %q is not a user key", pub)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v %v", st.Mode(), err)
	}
	seed, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(seed), "SU") {
		t.Fatal("seed file does not hold a user seed")
	}
	if got, err := broker.ReadNKeyPublic(path); err != nil || got != pub {
		t.Fatalf("ReadNKeyPublic %q %v, want %q", got, err, pub)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := broker.EnsureNKeySeed(path)
	if err != nil || again != pub {
		t.Fatalf("second call: %q %v, want the same key %q", again, err, pub)
	}
	if after, _ := os.ReadFile(path); string(after) != string(seed) {
		t.Fatal("the existing seed was replaced")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode of an existing seed not forced to 0600: %v", st.Mode())
	}
}

// TestNKeySeedErrorsNeverHoldTheSeed feeds files that hold secrets but no user seed:
// both functions refuse them, keep them, and say so without quoting them.
func TestNKeySeedErrorsNeverHoldTheSeed(t *testing.T) {
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	for name, content := range map[string]string{
		"account seed":   string(accountSeed) + "\n",
		"corrupted seed": string(userSeed[:len(userSeed)-2]) + "AA\n",
		"not a seed":     "hunter2-very-secret\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.nk")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			secret := strings.TrimSpace(content)
			for fn, call := range map[string]func(string) (string, error){
				"EnsureNKeySeed": broker.EnsureNKeySeed, "ReadNKeyPublic": broker.ReadNKeyPublic,
			} {
				_, err := call(path)
				if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:12]) {
					t.Fatalf("%s: %v", fn, err)
				}
			}
			if kept, _ := os.ReadFile(path); string(kept) != content {
				t.Fatal("a file that is not a user seed was overwritten")
			}
		})
	}
}
