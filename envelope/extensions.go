package envelope

// The extension payloads below are Chiffon's own message types for registration,
// liveness and control. They travel in the same envelope and are validated as strictly
// as the specification's four; docs/protocol.md describes each.

// Agent status values, reported in heartbeats and control acknowledgements.
const (
	AgentIdle     = "idle"
	AgentBusy     = "busy"
	AgentDraining = "draining"
)

// Register announces an agent instance to the orchestrator (agent -> orchestrator,
// request/reply on the registry.register subject). The reply is a RegisterAck, or an
// error envelope.
type Register struct {
	// AgentID identifies the instance; it is used in subject names, so it holds only
	// letters, digits, '-' and '_'.
	AgentID string `json:"agent_id"`
	// Name is a human-readable name, such as the host name.
	Name              string   `json:"name,omitempty"`
	SupportedVersions []string `json:"supported_versions"`
	WorkTypes         []string `json:"work_types"`
	Capabilities      []string `json:"capabilities,omitempty"`
	// Labels describe the agent for selecting it, such as {"site": "attic",
	// "gpu": "true"}; see CheckLabel.
	Labels         map[string]string `json:"labels,omitempty"`
	MaxConcurrency int               `json:"max_concurrency"`
	// HeartbeatIntervalMS is how often the agent sends heartbeats.
	HeartbeatIntervalMS int64      `json:"heartbeat_interval_ms"`
	Resources           *Resources `json:"resources,omitempty"`
}

// MessageType returns TypeRegister.
func (*Register) MessageType() Type { return TypeRegister }

// Resources describes what an agent's machine has.
type Resources struct {
	CPUCores   int64 `json:"cpu_cores"`
	MemoryMB   int64 `json:"memory_mb"`
	DiskFreeMB int64 `json:"disk_free_mb"`
	// GPUVRAMMB is the memory of every GPU together, in MiB; each GPU is in the
	// message's x_custom_fields.gpus (MachineGPUs).
	GPUVRAMMB int64 `json:"gpu_vram_mb"`
}

// RegisterAck accepts a registration and names the protocol version negotiated for the
// agent (orchestrator -> agent).
type RegisterAck struct {
	AgentID         string `json:"agent_id"`
	OrchestratorID  string `json:"orchestrator_id"`
	ProtocolVersion string `json:"protocol_version"`
}

// MessageType returns TypeRegisterAck.
func (*RegisterAck) MessageType() Type { return TypeRegisterAck }

// Heartbeat tells the orchestrator an agent is alive and how loaded it is
// (agent -> orchestrator, on the registry.heartbeat subject).
type Heartbeat struct {
	AgentID        string `json:"agent_id"`
	Status         string `json:"status"`
	ActiveTasks    int    `json:"active_tasks"`
	MaxConcurrency int    `json:"max_concurrency"`
	// ActiveTaskIDs lists the tasks running now.
	ActiveTaskIDs []string   `json:"active_task_ids,omitempty"`
	Resources     *Resources `json:"resources,omitempty"`
}

// MessageType returns TypeHeartbeat.
func (*Heartbeat) MessageType() Type { return TypeHeartbeat }

// Discover asks every agent to register again; an orchestrator sends one per agent type
// when it starts, so that it relearns the agents after a restart.
type Discover struct {
	OrchestratorID string `json:"orchestrator_id"`
}

// MessageType returns TypeDiscover.
func (*Discover) MessageType() Type { return TypeDiscover }

// Cancel asks an agent to stop a task; the task then ends with a work_result of status
// cancelled (orchestrator -> agent, control subject).
type Cancel struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason,omitempty"`
}

// MessageType returns TypeCancel.
func (*Cancel) MessageType() Type { return TypeCancel }

// Ping is a health check on the control subject; the agent answers with a ControlAck.
type Ping struct{}

// MessageType returns TypePing.
func (*Ping) MessageType() Type { return TypePing }

// Drain asks an agent to stop taking work and finish what it runs.
type Drain struct {
	// TimeoutSeconds bounds how long running work may take to finish; 0 means the
	// agent's own drain timeout.
	TimeoutSeconds int64 `json:"timeout_seconds,omitempty"`
}

// MessageType returns TypeDrain.
func (*Drain) MessageType() Type { return TypeDrain }

// ControlAck answers a cancel, ping or drain.
type ControlAck struct {
	// Command is the type of the message answered: cancel, ping or drain.
	Command     Type   `json:"command"`
	OK          bool   `json:"ok"`
	Message     string `json:"message,omitempty"`
	AgentStatus string `json:"agent_status,omitempty"`
	ActiveTasks int    `json:"active_tasks"`
}

// MessageType returns TypeControlAck.
func (*ControlAck) MessageType() Type { return TypeControlAck }
