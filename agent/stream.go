package agent

import (
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
)

// Stream tuning from docs/design.md.
const (
	flushInterval = 250 * time.Millisecond
	flushBytes    = 64 << 10
	// ackDelay is how long the acknowledgement may wait for the task's first
	// message. A task that ends sooner sends it just before its result, and the two
	// usually leave in one write: one socket write, one delivery and one wake-up
	// of the orchestrator fewer than an acknowledgement of its own.
	ackDelay = 10 * time.Millisecond
)

// stepAccepted names step 0, the acknowledgement's.
const stepAccepted = "accepted"

// publisher sends envelopes with the agent's auth headers.
type publisher struct {
	nc *nats.Conn
	// auth is the token and agent id headers, shared by every message of a task
	// (see broker.AuthHeader); identified adds the process's Chiffon-Instance, for
	// registrations, heartbeats and control answers, which the orchestrator tells
	// processes apart by.
	auth, identified nats.Header
	log              *slog.Logger
}

// maxMessage is the largest envelope that both NATS and a strict receiver accept.
func (p *publisher) maxMessage() int {
	m := int(p.nc.MaxPayload())
	if m <= 0 || m > envelope.MaxEnvelopeSize {
		m = envelope.MaxEnvelopeSize
	}
	return m - 1024 // headers
}

func (p *publisher) msg(subject string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: data, Header: p.auth}
}

// identifiedMsg is msg with the process's instance header.
func (p *publisher) identifiedMsg(subject string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: data, Header: p.identified}
}

// publish sends env with the task headers; publishIdentified with the process's
// instance header as well.
func (p *publisher) publish(subject string, env *envelope.Envelope) {
	p.send(subject, env, p.msg)
}

func (p *publisher) publishIdentified(subject string, env *envelope.Envelope) {
	p.send(subject, env, p.identifiedMsg)
}

func (p *publisher) send(subject string, env *envelope.Envelope, msg func(string, []byte) *nats.Msg) {
	data, err := envelope.Encode(env)
	if err != nil {
		p.log.Error("encode failed", "subject", subject, "type", env.Type, "err", err)
		return
	}
	p.publishMsg(subject, msg(subject, data))
}

func (p *publisher) publishEncoded(subject string, data []byte) {
	p.publishMsg(subject, p.msg(subject, data))
}

func (p *publisher) publishMsg(subject string, m *nats.Msg) {
	if err := p.nc.PublishMsg(m); err != nil {
		p.log.Warn("publish failed", "subject", subject, "err", err)
	}
}

// taskStream is the stream of one task: its statuses and result, sent to every reply
// subject attached to it. It keeps the output so far for re-attaching and caching.
type taskStream struct {
	pub       *publisher
	req       *envelope.Envelope
	taskID    string
	keepalive time.Duration
	maxOutput int64

	mu       sync.Mutex
	subjects []string
	out      []byte
	partial  []byte // an incomplete UTF-8 sequence held for the next write
	sent     int    // bytes of out already published
	dropped  bool
	dirty    bool // progress or step changed since the last status
	percent  int
	stepNum  int64
	stepName string
	lastSent time.Time
	acked    bool // the acknowledgement is sent
	result   *envelope.Envelope

	flusher *time.Timer // flushTick, from start
	closed  bool        // closeOutput has run: no more flushes
}

func newTaskStream(pub *publisher, req *envelope.Envelope, subject string, keepalive time.Duration, maxOutput int64) *taskStream {
	return &taskStream{
		pub: pub, req: req, taskID: req.Payload.(*envelope.WorkRequest).TaskID,
		keepalive: keepalive, maxOutput: maxOutput, subjects: []string{subject},
		stepName: stepAccepted,
	}
}

// start starts the flusher. Its first tick, after ackDelay, sends the
// acknowledgement unless a message of the task has already taken it along.
func (s *taskStream) start() {
	s.mu.Lock()
	s.flusher = time.AfterFunc(min(ackDelay, s.flushEvery()), s.flushTick)
	s.mu.Unlock()
}

// ackLocked sends the acknowledgement (step 0 "accepted" at 0%) to every subject,
// once. Every message of the task goes after it.
func (s *taskStream) ackLocked() {
	if s.acked {
		return
	}
	s.acked = true
	s.sendLocked(s.subjects, "", 0, &envelope.WorkStatus{TaskID: s.taskID, Status: envelope.StatusRunning,
		Step: envelope.Step{Name: stepAccepted}})
}

func (s *taskStream) flushEvery() time.Duration { return min(flushInterval, s.keepalive) }

// flushTick is the flusher: a timer rather than a goroutine per task, so that a short
// task neither starts one nor waits for it to stop. It sends what is pending and
// rearms itself, until closeOutput has closed the stream.
func (s *taskStream) flushTick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.ackLocked()
	if s.sent < len(s.out) || s.dirty || time.Since(s.lastSent) >= s.keepalive {
		s.flushLocked()
	}
	s.flusher.Reset(s.flushEvery())
}

// Write adds output. It never fails; output past the cap is dropped with a note.
func (s *taskStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := p // p is only read here: what is kept is copied
	if len(s.partial) > 0 {
		data = append(s.partial, p...)
	}
	cut := len(data)
	// Hold back a rune cut in two by the writer; the next write completes it.
	for i := 1; i < utf8.UTFMax && i <= len(data); i++ {
		if utf8.RuneStart(data[len(data)-i]) {
			if !utf8.FullRune(data[len(data)-i:]) {
				cut = len(data) - i
			}
			break
		}
	}
	s.partial = append([]byte(nil), data[cut:]...)
	s.appendBytesLocked(data[:cut])
	if len(s.out)-s.sent >= flushBytes {
		s.flushLocked()
	}
	return len(p), nil
}

// appendBytesLocked is appendLocked for bytes: valid UTF-8 within the cap, the usual
// case, is appended without first being copied into a string.
func (s *taskStream) appendBytesLocked(b []byte) {
	if s.dropped {
		return
	}
	if int64(len(s.out)+len(b)) > s.maxOutput || !utf8.Valid(b) {
		s.appendLocked(output.Sanitize(b))
		return
	}
	s.out = append(s.out, b...)
}

// outString is s.out[from:to] as a string, without a copy. s.out is append-only:
// bytes below its length are never written again (append writes past them, or into
// a new array, leaving the old one to the strings that share it), so the string
// never changes. Callers hold s.mu.
func (s *taskStream) outString(from, to int) string {
	if from >= to {
		return ""
	}
	return unsafe.String(&s.out[from], to-from)
}

func (s *taskStream) appendLocked(text string) {
	if s.dropped {
		return
	}
	if int64(len(s.out)+len(text)) > s.maxOutput {
		s.dropped = true
		text = "\n[chiffon: output over the agent's cap was dropped]\n"
	}
	s.out = append(s.out, text...)
}

// SetPercent implements Progress.
func (s *taskStream) SetPercent(p int) {
	s.mu.Lock()
	s.percent, s.dirty = max(0, min(100, p)), true
	s.mu.Unlock()
}

// Step implements Progress. The step it ends is sent as step_completed, with the
// output written during it; the last step of a task is ended by the work_result.
func (s *taskStream) Step(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // the handler has returned: its result ends the last step
	}
	s.sendStatusLocked(s.subjects, s.outString(s.sent, len(s.out)), int64(s.sent),
		&envelope.WorkStatus{TaskID: s.taskID, Status: envelope.StatusStepCompleted, ProgressPercent: s.percent,
			Step: envelope.Step{Number: s.stepNum, Name: s.stepName}})
	s.sent = len(s.out)
	s.stepNum++
	s.stepName, s.dirty = name, true
}

// flushLocked sends the unsent output, or an empty status, to every subject.
func (s *taskStream) flushLocked() {
	data := s.outString(s.sent, len(s.out))
	s.sendStatusLocked(s.subjects, data, int64(s.sent), nil)
	s.sent = len(s.out)
	s.dirty = false
}

// sendStatusLocked sends data, which starts at offset in the whole output, as one
// work_status or, when over 256 KiB, as chunks "bytes A-B of N" of data, after the
// acknowledgement if it is still to go.
func (s *taskStream) sendStatusLocked(subjects []string, data string, offset int64, ws *envelope.WorkStatus) {
	s.ackLocked()
	s.sendLocked(subjects, data, offset, ws)
}

func (s *taskStream) sendLocked(subjects []string, data string, offset int64, ws *envelope.WorkStatus) {
	s.lastSent = time.Now()
	if ws == nil {
		ws = &envelope.WorkStatus{TaskID: s.taskID, Status: envelope.StatusRunning, ProgressPercent: s.percent,
			Step: envelope.Step{Number: s.stepNum, Name: s.stepName}}
	}
	b := output.Batch{Data: data, Offset: offset, Total: int64(len(data)), Chunked: len(data) > envelope.MaxChunkSize}
	output.Statuses(s.req, *ws, b, s.pub.maxMessage(), func(enc []byte) {
		for _, subj := range subjects {
			s.pub.publishEncoded(subj, enc)
		}
	})
}

// closeOutput stops the flusher and sends the rest of the output. It returns the
// whole output.
func (s *taskStream) closeOutput() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.flusher != nil {
		s.flusher.Stop()
	}
	if len(s.partial) > 0 {
		s.appendLocked(output.Sanitize(s.partial))
		s.partial = nil
	}
	if s.sent < len(s.out) {
		s.flushLocked()
	}
	return s.outString(0, len(s.out))
}

// appendOutput adds text after the handler has returned (its Result.Output or error).
func (s *taskStream) appendOutput(text string) {
	s.mu.Lock()
	s.appendLocked(text)
	s.mu.Unlock()
}

// publishResult sends the result, encoded once by the caller (nil when it did not
// encode), to every subject and remembers it for late attaches.
func (s *taskStream) publishResult(env *envelope.Envelope, encoded []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackLocked()
	s.result = env
	for _, subj := range s.subjects {
		if encoded != nil {
			s.pub.publishEncoded(subj, encoded)
		} else {
			s.pub.publish(subj, env) // logs why it does not encode
		}
	}
}

// attach adds a reply subject: it replays the output sent so far (and the result if
// the task has ended), then live messages follow.
func (s *taskStream) attach(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendStatusLocked([]string{subject}, s.outString(0, s.sent), 0, nil)
	if s.result != nil {
		s.pub.publish(subject, s.result)
		return
	}
	s.subjects = append(s.subjects, subject)
}
