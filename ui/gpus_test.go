package ui

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// fakeGPUs are code-1's, as the fake API lists it.
var fakeGPUs = []envelope.GPU{
	{Index: 0, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", TotalMB: 81920, FreeMB: 81510},
	{Index: 1, UUID: "GPU-2", Name: "NVIDIA L4", TotalMB: 23034, FreeMB: 1024},
}

// greeterGPU is the GPU memory the greeter schedule's task needs.
var greeterGPU = int64(2048)

// TestAgentAndTaskPagesShowGPUs: an agent's page lists its GPUs with the
// memory each has free; a task's shows the GPU memory it needs and the GPUs
// it ran on with its peak on each.
func TestAgentAndTaskPagesShowGPUs(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	_, agent := get(t, c, srv.URL+"/agents/code-1")
	for _, want := range []string{`<dt>GPUs</dt><dd id="gpus">`, `<div class="gpu">#0 NVIDIA H100 80GB HBM3: 79.6 GiB free of 80.0 GiB</div>`,
		`<div class="gpu">#1 NVIDIA L4: 1.0 GiB free of 22.5 GiB</div>`} {
		if !strings.Contains(agent, want) {
			t.Errorf("the agent's page lacks %s", want)
		}
	}
	_, page := get(t, c, srv.URL+"/tasks/"+fakeTaskID)
	for _, want := range []string{`<dd id="gpu-need">4.0 GiB on one GPU</dd>`,
		`<dd id="gpus-used"><div class="gpu">#0 NVIDIA H100 80GB HBM3 · peak 4.0 GiB</div></dd>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the task's page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("agent page:\n%s\ntask page:\n%s", agent, page)
	}
}
