package agent

import (
	"os"
	"path/filepath"
	"time"
)

// HealthFile is the file in the data dir that an agent rewrites each time it registers
// or sends a heartbeat while connected to NATS. Its age tells a container or service
// manager whether the agent is alive: `chiffon healthcheck --file <data_dir>/heartbeat`.
const HealthFile = "heartbeat"

// markHealthy rewrites the health file with the current time, when connected.
func (a *Agent) markHealthy() {
	if !a.nc.IsConnected() {
		return
	}
	path := filepath.Join(a.cfg.DataDir, HealthFile)
	if err := os.WriteFile(path, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		a.log.Warn("write health file", "path", path, "err", err)
	}
}
