package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// testWait is how long any one expected event may take.
const testWait = 20 * time.Second

// outputRecorder is a Progress that records a task's output and steps, and says
// when output comes.
type outputRecorder struct {
	mu    sync.Mutex
	out   bytes.Buffer
	steps []string
	wrote chan struct{}
}

func newOutputRecorder() *outputRecorder { return &outputRecorder{wrote: make(chan struct{}, 1)} }

func (r *outputRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	return r.out.Write(b)
}

func (r *outputRecorder) SetPercent(int) {}

func (r *outputRecorder) Step(name string) {
	r.mu.Lock()
	r.steps = append(r.steps, name)
	r.mu.Unlock()
}

func (r *outputRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitOutput waits until the output holds s.
func (r *outputRecorder) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(testWait)
	for !strings.Contains(r.String(), s) {
		select {
		case <-r.wrote:
		case <-deadline:
			t.Fatalf("output %q never held %q", r.String(), s)
		}
	}
}

// runScript runs a shell work type with env set and returns what run returned,
// failing the test when run does not return. during, when not nil, runs meanwhile
// and may cancel the task.
func runScript(t *testing.T, script string, env map[string]string, rec *outputRecorder, during func(cancel context.CancelFunc)) (Result, error) {
	t.Helper()
	s, err := newSubprocess("script", WorkTypeConfig{Shell: script, Env: []string{"PATH"}, SetEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		res Result
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan ran, 1)
	go func() {
		res, err := s.run(ctx, &Request{TaskID: "task-" + t.Name(), RequestID: "request-1"}, rec)
		done <- ran{res, err}
	}()
	if during != nil {
		during(cancel)
	}
	select {
	case r := <-done:
		return r.res, r.err
	case <-time.After(testWait):
		t.Fatalf("run did not return; output so far %q", rec.String())
	}
	return Result{}, nil
}

func TestStdoutAndStderrLinesKeepTheirOrder(t *testing.T) {
	const pairs = 200
	rec := newOutputRecorder()
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`, pairs)
	if _, err := runScript(t, script, nil, rec, nil); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= pairs; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	if out := rec.String(); out != want.String() {
		got, lines := strings.Split(out, "\n"), strings.Split(want.String(), "\n")
		for i := range lines {
			if i >= len(got) || got[i] != lines[i] {
				t.Fatalf("line %d is %q, want %q: stdout and stderr out of order", i+1, got[min(i, len(got)-1)], lines[i])
			}
		}
		t.Fatalf("output %q", out)
	}
}

func TestStructuredOutputAndLineProtocolComeFromStdoutOnly(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		structured   string // JSON; "null" for none
		output       string
		steps        []string
	}{
		{"log on stderr after the JSON", `echo '{"ok":true}'; echo 'done in 2s' >&2`, `{"ok":true}`, "{\"ok\":true}\ndone in 2s\n", nil},
		{"JSON on stderr", `echo plain; echo '{"ok":true}' >&2`, "null", "plain\n{\"ok\":true}\n", nil},
		{"protocol on stderr is output", `echo '::step from stderr' >&2; echo '::step build'; echo '[1]'`,
			"[1]", "::step from stderr\n[1]\n", []string{"build"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newOutputRecorder()
			res, err := runScript(t, tc.script, nil, rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(res.Structured); string(got) != tc.structured {
				t.Errorf("structured output %s, want %s", got, tc.structured)
			}
			if got := rec.String(); got != tc.output {
				t.Errorf("output %q, want %q", got, tc.output)
			}
			if fmt.Sprint(rec.steps) != fmt.Sprint(tc.steps) {
				t.Errorf("steps %q, want %q", rec.steps, tc.steps)
			}
		})
	}
}

// startMerge reads pipes whose write ends, m.stdout and m.stderr, the test holds
// as a process would.
func startMerge(t *testing.T, pause time.Duration) (*outputMerge, *lineProtocol, *outputRecorder) {
	t.Helper()
	m, err := newOutputMerge()
	if err != nil {
		t.Fatal(err)
	}
	m.pause = pause
	rec := newOutputRecorder()
	lines := &lineProtocol{p: rec}
	m.start(lines, rec)
	return m, lines, rec
}

// finishMerge calls finish, failing the test when it does not return.
func finishMerge(t *testing.T, m *outputMerge) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.finish()
	}()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatal("finish waits for the end of pipes a process still holds")
	}
}

func TestPartialLineIsNotCutByTheOtherStream(t *testing.T) {
	for _, cut := range []string{"stdout", "stderr"} {
		t.Run(cut, func(t *testing.T) {
			m, lines, rec := startMerge(t, time.Hour)
			defer m.closeWriteEnds()
			partial, other := m.stdout, m.stderr
			if cut == "stderr" {
				partial, other = other, partial
			}
			fmt.Fprint(partial, "par")
			fmt.Fprint(other, "other\n")
			rec.waitOutput(t, "other\n")
			fmt.Fprint(partial, "tial\n")
			rec.waitOutput(t, "partial\n")
			m.closeWriteEnds()
			finishMerge(t, m)
			lines.close()
			if got := rec.String(); got != "other\npartial\n" {
				t.Fatalf("output %q, want %q", got, "other\npartial\n")
			}
		})
	}
}

// TestLinesTakeTurnsAndStayWhole drives writeLines from known states: what each
// stream holds, the read that brought it, and whose turn it is.
func TestLinesTakeTurnsAndStayWhole(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		stdout, stderr         string // held
		stdoutRead, stderrRead uint64 // the read that brought it, the last of its pipe
		stderrPipe             string // in stderr's pipe, not read yet
		turn                   int
		want                   string
	}{
		{"stdout read after stderr: stderr is read again", "o1\no2\n", "", 2, 1, "e1\n", 0, "o1\ne1\no2\n"},
		{"read together: stdout first, then one each", "a\nb\n", "x\n", 2, 1, "", 0, "a\nx\nb\n"},
		{"after a stdout line, stderr's turn", "o\n", "e\n", 2, 1, "", 1, "e\no\n"},
		{"stderr alone, stdout read since", "", "e1\ne2\n", 3, 2, "", 0, "e1\ne2\n"},
		{"a partial line waits for its end", "other\n", "par", 2, 1, "", 0, "other\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newOutputMerge()
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			rec := newOutputRecorder()
			out, errs := m.streams[0], m.streams[1]
			out.w, errs.w = &lineProtocol{p: rec}, rec
			out.buf, errs.buf = []byte(tc.stdout), []byte(tc.stderr)
			out.got, out.checked, errs.got, errs.checked = tc.stdoutRead, tc.stdoutRead, tc.stderrRead, tc.stderrRead
			m.reads, m.turn = max(tc.stdoutRead, tc.stderrRead), tc.turn
			fmt.Fprint(m.stderr, tc.stderrPipe)
			now := time.Now()
			out.seen, errs.seen = now, now
			m.writeLines(now)
			if got := rec.String(); got != tc.want {
				t.Fatalf("output %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPausedPartialLineIsOutput(t *testing.T) {
	m, lines, rec := startMerge(t, 10*time.Millisecond)
	defer m.closeWriteEnds()
	fmt.Fprint(m.stdout, "Checking... ")
	rec.waitOutput(t, "Checking... ")
	fmt.Fprint(m.stderr, "Password: ")
	rec.waitOutput(t, "Password: ")
	fmt.Fprint(m.stdout, "ok\n")
	rec.waitOutput(t, "ok\n")
	m.closeWriteEnds()
	finishMerge(t, m)
	lines.close()
	if got, want := rec.String(), "Checking... Password: ok\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestFinishReadsWhatThePipesHoldWithoutWaitingForTheirEnd(t *testing.T) {
	m, lines, rec := startMerge(t, time.Hour)
	defer m.closeWriteEnds() // as a process that escaped the task holds them
	fmt.Fprint(m.stdout, "last line\n{\"ok\":")
	fmt.Fprint(m.stderr, "log\nno newline")
	finishMerge(t, m)
	lines.close()
	if got, want := rec.String(), "last line\nlog\nno newline{\"ok\":"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestLineProtocolPause(t *testing.T) {
	for _, tc := range []struct {
		name       string
		writes     []string // a pause after each
		output     string
		steps      []string
		structured string
	}{
		{"partial line shown", []string{"Checking... ", "ok\n"}, "Checking... ok\n", nil, "null"},
		{"protocol line held", []string{"::progress 5", "0 build\n"}, "", []string{"build"}, "null"},
		{"start of a protocol line held", []string{"::st", "ep test\n"}, "", []string{"test"}, "null"},
		{"shown line is output, not protocol", []string{"x", "\n::step s\n"}, "x\n", []string{"s"}, "null"},
		{"JSON cut by a pause", []string{`{"ok":`, "true}\n"}, "{\"ok\":true}\n", nil, `{"ok":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newOutputRecorder()
			l := &lineProtocol{p: rec}
			for _, w := range tc.writes {
				_, _ = l.Write([]byte(w))
				l.pause()
			}
			l.close()
			if got := rec.String(); got != tc.output {
				t.Errorf("output %q, want %q", got, tc.output)
			}
			if fmt.Sprint(rec.steps) != fmt.Sprint(tc.steps) {
				t.Errorf("steps %q, want %q", rec.steps, tc.steps)
			}
			if got, _ := json.Marshal(l.structured()); string(got) != tc.structured {
				t.Errorf("structured %s, want %s", got, tc.structured)
			}
		})
	}
}
