package tests

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// stockNATS is a nats-server built once from the module cache, at the version go.mod
// requires.
var (
	stockNATSOnce sync.Once
	stockNATSBin  string
	stockNATSErr  error
)

// stockNATSServer builds the stock nats-server, skipping the test only when the
// build failed for want of the network (the module not in the cache, and no way to
// download it).
func stockNATSServer(t *testing.T) string {
	t.Helper()
	stockNATSOnce.Do(func() {
		stockNATSBin = filepath.Join(filepath.Dir(chiffonBin), "nats-server")
		cmd := exec.Command("go", "build", "-o", stockNATSBin, "github.com/nats-io/nats-server/v2")
		cmd.Dir = ".." // the module root: go.mod names the version
		if out, err := cmd.CombinedOutput(); err != nil {
			stockNATSErr = fmt.Errorf("go build github.com/nats-io/nats-server/v2: %v\n%s", err, out)
		}
	})
	if stockNATSErr != nil {
		for _, offline := range []string{"dial tcp", "no such host", "network is unreachable", "i/o timeout",
			"connection refused", "TLS handshake timeout", "proxyconnect", "GOPROXY=off"} {
			if strings.Contains(stockNATSErr.Error(), offline) {
				t.Skipf("cannot build a stock nats-server without the network: %v", stockNATSErr)
			}
		}
		t.Fatal(stockNATSErr)
	}
	return stockNATSBin
}

// TestStockNATSServerRunsATask runs the production chiffon binary's orchestrator
// and agent against a stock nats-server started with the broker.conf `chiffon
// init` wrote, and a task end to end through the API.
func TestStockNATSServerRunsATask(t *testing.T) {
	bin := stockNATSServer(t)
	c := newCluster(t, 1)
	c.bin = chiffonBin
	c.broker = c.spawnBin("broker", bin, nil, "-c", c.brokerConf())
	c.waitBroker()
	if nc, err := c.dialAs("", c.secret("ca.pem"), ""); err == nil {
		nc.Close()
		t.Fatal("the stock nats-server let an anonymous client in")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous client: %v, want an authorization violation", err)
	}
	c.startOrchestrator()
	c.startAgent("code-1")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 7, "sleep": "0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.waitTask(ctx, tsk.ID)
	want := fmt.Sprintf("out 7 %s\n", tsk.RequestID)
	if out := c.output(ctx, tsk.ID); got.State != task.StateSucceeded || out != want {
		t.Fatalf("task through the stock nats-server: %s, output %q; want succeeded with %q", got.State, out, want)
	}
	if log := strings.Join(c.logs()["broker.log"], "\n"); !strings.Contains(log, "Starting nats-server") ||
		!strings.Contains(log, "TLS required for client connections") {
		t.Errorf("the broker is not the stock nats-server requiring TLS:\n%s", log)
	}
	c.assertNoTokenLogged()
}
