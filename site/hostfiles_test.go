package site

import (
	"slices"
	"strings"
	"testing"
)

// TestHostFilesGiveEachHostOnlyItsFiles: the list init prints, per host, as a
// table of specs: no agent host holds another's token or key or the
// orchestrator's, the API's certificate goes to the orchestrators only when
// there is one, and client certificates only with mutual TLS.
func TestHostFilesGiveEachHostOnlyItsFiles(t *testing.T) {
	agents := []Agent{{"code", "code-1"}, {"infra", "infra-1"}}
	for _, tc := range []struct {
		name string
		spec Spec
		want []string
	}{
		{"one broker", Spec{Agents: agents, Clients: []Client{{"ci", []string{"code-1"}}}}, []string{
			"broker: server.pem, server-key.pem, ca.pem",
			"orchestrator: orchestrator.nk, api.token, ca.pem, orchestrator-store.nk, agent-code-1.token, agent-code-1.orchestrator.token, agent-infra-1.token, agent-infra-1.orchestrator.token",
			"agent code-1: agent-code-1.nk, agent-code-1.token, agent-code-1.orchestrator.token, ca.pem",
			"agent infra-1: agent-infra-1.nk, agent-infra-1.token, agent-infra-1.orchestrator.token, ca.pem",
			"client ci: client-ci.nk, ca.pem, agent-code-1.token, agent-code-1.orchestrator.token",
		}},
		{"mutual TLS and an API certificate", Spec{Agents: agents[:1], APIHosts: []string{"o.lan"}, MutualTLS: true}, []string{
			"broker: server.pem, server-key.pem, ca.pem",
			"orchestrator: orchestrator.nk, api.token, ca.pem, client-orchestrator.pem, client-orchestrator-key.pem, orchestrator-store.nk, client-orchestrator-store.pem, client-orchestrator-store-key.pem, api.pem, api-key.pem, agent-code-1.token, agent-code-1.orchestrator.token",
			"agent code-1: agent-code-1.nk, agent-code-1.token, agent-code-1.orchestrator.token, ca.pem, client-agent-code-1.pem, client-agent-code-1-key.pem",
		}},
		{"a cluster and a group", Spec{Agents: agents[:1], Nodes: []Node{{"broker-1", nil}, {"broker-2", nil}},
			Orchestrators: []string{"orchestrator-1", "orchestrator-2"}}, []string{
			"broker-1: broker-1.pem, broker-1-key.pem, ca.pem",
			"broker-2: broker-2.pem, broker-2-key.pem, ca.pem",
			"orchestrator-1: orchestrator.nk, api.token, ca.pem, orchestrator-store.nk, agent-code-1.token, agent-code-1.orchestrator.token",
			"orchestrator-2: orchestrator.nk, api.token, ca.pem, orchestrator-store.nk, agent-code-1.token, agent-code-1.orchestrator.token",
			"agent code-1: agent-code-1.nk, agent-code-1.token, agent-code-1.orchestrator.token, ca.pem",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, h := range (&Secrets{spec: tc.spec}).HostFiles() {
				got = append(got, h.Host+": "+strings.Join(h.Files, ", "))
				if slices.Contains(h.Files, "ca-key.pem") {
					t.Errorf("%s is told to hold the CA's key", h.Host)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
