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

// Register is where agent agentID registers (request/reply). The id in the
// subject is what the broker vouches for: each agent may publish only on its own,
// so the orchestrator knows who asks, and whose inbox an answer may go to, before
// it reads the message.
func (s Subjects) Register(agentID string) string { return s.join("registry", "register", agentID) }

// Registers matches every agent's Register subject.
func (s Subjects) Registers() string { return s.Register("*") }

// Store is the subject prefix of the orchestrator's JetStream task store
// (store.kind jetstream): <prefix>.store.
func (s Subjects) Store() string { return s.join("store") }

// Heartbeat is where agent agentID publishes heartbeats; like Register, the
// subject names the sender.
func (s Subjects) Heartbeat(agentID string) string { return s.join("registry", "heartbeat", agentID) }

// Heartbeats matches every agent's Heartbeat subject.
func (s Subjects) Heartbeats() string { return s.Heartbeat("*") }

// SenderOf returns the agent id that a Register or Heartbeat subject names (its
// last token), or "" for a subject of another form.
func SenderOf(subject string) string {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 || i == len(subject)-1 {
		return ""
	}
	return subject[i+1:]
}

// ControlReplies is the prefix of the subjects where agent agentID answers the
// orchestrator's requests on its control subject (ping, cancel, drain): only
// that agent may publish under it, so an answer there comes from it (or the
// server, with "no responders"), whatever else it says.
func (s Subjects) ControlReplies(agentID string) string {
	return s.join("inbox", "orch", "agent", agentID)
}

// ForwardReplies is the prefix of the subjects where the leading orchestrator of
// a group answers a standby's forwarded API request: only orchestrators may
// publish under it.
func (s Subjects) ForwardReplies() string { return s.join("inbox", "orch", "fwd") }

// StoreInbox is the inbox prefix of the orchestrator's store connection, where
// the JetStream API answers it.
func (s Subjects) StoreInbox() string { return s.join("inbox", "store") }
