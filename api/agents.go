package api

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// AgentInfo is an agent as the API shows it.
type AgentInfo struct {
	ID   string             `json:"id"`
	Type envelope.AgentType `json:"type,omitempty"`
	Name string             `json:"name,omitempty"`
	// State is online, offline, or unknown for a configured agent never heard from.
	State string `json:"state"`
	// Status is the agent's own: idle, busy or draining.
	Status          string     `json:"status,omitempty"`
	Load            int        `json:"load"`
	Capacity        int        `json:"capacity"`
	ReportedActive  int        `json:"reported_active"`
	Breaker         string     `json:"breaker"`
	LastHeartbeat   *time.Time `json:"last_heartbeat"`
	ProtocolVersion string     `json:"protocol_version,omitempty"`
	WorkTypes       []string   `json:"work_types,omitempty"`
	RegisteredAt    *time.Time `json:"registered_at,omitempty"`
	// Resources is what the agent last said its machine has, at registration
	// or in a heartbeat; its GPUs are in GPUs, not here.
	Resources *envelope.Resources `json:"resources,omitempty"`
	// GPUs are the agent's GPUs, each with the memory it had free at the
	// agent's last heartbeat; nil for an agent without GPUs.
	GPUs []envelope.GPU `json:"gpus,omitempty"`
	// Labels are the agent's, from its registration.
	Labels map[string]string `json:"labels,omitempty"`
	// Limits are those its config sets: nil when it sets none. Capacity is
	// already within Limits.MaxConcurrency, and WorkTypes within
	// Limits.AllowedWorkTypes.
	Limits *AgentLimits `json:"limits,omitempty"`
}

// AgentLimits are the limits an agent's config sets on it (AgentConfig), as the
// API shows them.
type AgentLimits struct {
	// AllowedWorkTypes, when set, are the only work types it is sent.
	AllowedWorkTypes []string `json:"allowed_work_types,omitempty"`
	// MaxConcurrency caps its capacity; 0 means none.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// RateLimit bounds how often it is sent work: "N/s", "N/m" or "N/h".
	RateLimit string `json:"rate_limit,omitempty"`
	// MaxRequestBytes bounds the work_requests it is sent, in bytes.
	MaxRequestBytes int64 `json:"max_request_bytes,omitempty"`
}

// Readiness is the body of /readyz.
type Readiness struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	Role
}

// Role says what an orchestrator is in its group.
type Role struct {
	// Role is "leader" or "standby"; "" for an orchestrator alone.
	Role string `json:"role,omitempty"`
	// Leader is the leadership record last seen, when there is one.
	Leader *Leader `json:"leader,omitempty"`
}

// Leader is the orchestrator that leads a group, as its lease record says.
type Leader struct {
	// Name is the leader's name (its host, or ha.name).
	Name string `json:"name"`
	// API is where its HTTP API is reached (ha.advertise_url).
	API string `json:"api,omitempty"`
	// Term is new at every takeover.
	Term string `json:"term"`
	// Since is when the term began.
	Since time.Time `json:"since"`
	// LeaseMS is the lease the leader renews within, in milliseconds.
	LeaseMS int64 `json:"lease_ms"`
	// Resigned says the leader left: a standby takes over at once.
	Resigned bool `json:"resigned,omitempty"`
}
