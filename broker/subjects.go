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

// AgentControl is where an agent instance receives cancel, ping, drain and
// discover.
func (s Subjects) AgentControl(agentID string) string {
	return s.join("agent", agentID, "control")
}

// OrchTask is the reply subject of one attempt of a task: where the agent the
// attempt went to sends its work_status, work_result and errors. The agent's id
// in it lets the broker allow each agent only its own task inboxes; nonce, new
// per attempt, makes the subject unguessable, so that nobody but the agent (and
// the server, with "no responders") can answer the attempt.
func (s Subjects) OrchTask(orchID, agentID, taskID, nonce string) string {
	return s.join("orch", orchID, "task", agentID, taskID, nonce)
}

// OrchTasks matches every task inbox of one orchestrator.
func (s Subjects) OrchTasks(orchID string) string { return s.join("orch", orchID, "task", ">") }

// TaskInbox is a task inbox subject (see OrchTask) taken apart.
type TaskInbox struct {
	AgentID, TaskID, Nonce string
}

// ParseTaskInbox takes apart a subject built by OrchTask; ok is false for a
// subject of another form.
func ParseTaskInbox(subject string) (inbox TaskInbox, ok bool) {
	// From the end, without allocating: it runs for every message of a task.
	rest := subject
	last := func() string {
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			ok = false
			return ""
		}
		tok := rest[i+1:]
		rest = rest[:i]
		return tok
	}
	ok = true
	inbox.Nonce, inbox.TaskID, inbox.AgentID = last(), last(), last()
	if task := last(); task != "task" || !ok {
		return TaskInbox{}, false
	}
	_ = last() // orch_id
	if !strings.HasSuffix(rest, ".orch") || !ok {
		return TaskInbox{}, false
	}
	return inbox, true
}

// OrchAPI is where the standbys of a group of orchestrators sharing orchID
// forward a submit, a cancel or the agent list to the leader (request/reply).
func (s Subjects) OrchAPI(orchID string) string { return s.join("orch", orchID, "api") }

// Register is where agents register (request/reply).
func (s Subjects) Register() string { return s.join("registry", "register") }

// Store is the subject prefix of the orchestrator's JetStream task store
// (store.kind jetstream): <prefix>.store.
func (s Subjects) Store() string { return s.join("store") }

// Heartbeat is where agents publish heartbeats.
func (s Subjects) Heartbeat() string { return s.join("registry", "heartbeat") }
