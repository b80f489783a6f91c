package roster

import (
	"sync"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// TestAdmitAndForgetLeaveEarlierTablesAlone: a table read before an Admit or
// a Forget stays as it was (readers hold no lock), the new one has the change,
// and the headers carry the orchestrator's token and the instance.
func TestAdmitAndForgetLeaveEarlierTablesAlone(t *testing.T) {
	r := New([]policy.AgentConfig{{ID: "a", Type: "infra", Token: "ta", OrchestratorToken: "oa"}}, "orch-2")
	before := r.Now()
	r.Admit(policy.AgentConfig{ID: "b", Type: "code", Token: "tb", OrchestratorToken: "ob"})
	if _, ok := before.Token("b"); ok {
		t.Error("Admit changed a table read before it")
	}
	tok, ok := r.Now().Token("b")
	hdr, _ := r.Now().Header("b")
	if !ok || tok != "tb" || r.Now()["b"].Type != "code" || r.Now().Config("b").ID != "b" ||
		hdr.Get(broker.HeaderAuthorization) != "Bearer ob" || hdr.Get(broker.HeaderInstance) != "orch-2" {
		t.Errorf("admitted b: token %q %t, entry %+v", tok, ok, r.Now()["b"])
	}
	admitted := r.Now()
	r.Forget("b")
	if _, ok := r.Now().Token("b"); ok {
		t.Error("b's token is still known after Forget")
	}
	if _, ok := r.Now().Header("b"); ok {
		t.Error("a message to the forgotten b still gets headers")
	}
	if _, ok := admitted.Token("b"); !ok {
		t.Error("Forget changed a table read before it")
	}
	if _, ok := r.Now().Token("a"); !ok {
		t.Error("Forget of b dropped a")
	}
}

// TestAdmitsAndForgetsAtOnceLoseNothing: concurrent Admits and Forgets of
// distinct agents each land (run with -race).
func TestAdmitsAndForgetsAtOnceLoseNothing(t *testing.T) {
	r := New(nil, "")
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Admit(policy.AgentConfig{ID: id, Token: "t" + id, OrchestratorToken: "o" + id})
			r.Admit(policy.AgentConfig{ID: id + "-gone", Token: "x", OrchestratorToken: "y"})
			r.Forget(id + "-gone")
			_, _ = r.Now().Token(id)
		}()
	}
	wg.Wait()
	if got := len(r.Now()); got != len(ids) {
		t.Errorf("%d agents known, want %d: %v", got, len(ids), r.Now())
	}
}
