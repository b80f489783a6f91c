package broker

import "strings"

// DefaultPrefix is the first token of every Chiffon subject.
const DefaultPrefix = "chiffon"

// Subjects builds every subject name Chiffon uses, under one prefix.
type Subjects struct {
	// Prefix is the first token; "" means DefaultPrefix.
	Prefix string
}

func (s Subjects) join(parts ...string) string {
	p := s.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + "." + strings.Join(parts, ".")
}

// AgentWork is where an agent instance receives work_requests.
func (s Subjects) AgentWork(agentID string) string { return s.join("agent", agentID, "work") }

// AgentControl is where an agent instance receives cancel, ping and drain.
func (s Subjects) AgentControl(agentID string) string {
	return s.join("agent", agentID, "control")
}

// OrchTask is the inbox where an orchestrator receives the statuses, result and errors
// of one task.
func (s Subjects) OrchTask(orchID, taskID string) string {
	return s.join("orch", orchID, "task", taskID)
}

// OrchTasks matches every task inbox of one orchestrator.
func (s Subjects) OrchTasks(orchID string) string { return s.join("orch", orchID, "task", "*") }

// Register is where agents register (request/reply).
func (s Subjects) Register() string { return s.join("registry", "register") }

// Heartbeat is where agents publish heartbeats.
func (s Subjects) Heartbeat() string { return s.join("registry", "heartbeat") }

// Discover is where an orchestrator asks every agent to register again.
func (s Subjects) Discover() string { return s.join("registry", "discover") }

// TaskIDFromSubject returns the last token of a task inbox subject.
func TaskIDFromSubject(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// NATSConfig is the `nats` section of a daemon's config file: where the broker is and
// which subject prefix to use.
type NATSConfig struct {
	// URLs of the NATS servers; several give failover within a cluster.
	URLs []string `yaml:"urls"`
	// Prefix is the first token of every subject; "" means DefaultPrefix.
	Prefix string `yaml:"prefix"`
}
