package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/chiffon-dev/chiffon/worktype"
)

// ExitInvalidParameters is the exit code of a task whose parameters fail the work
// type's schema, or a subprocess's templates; nothing is run.
const ExitInvalidParameters = 2

// subprocess runs one configured work type as a child process.
type subprocess struct {
	name      string
	cfg       WorkTypeConfig
	argv      []argTemplate
	dir       *template.Template
	dirBase   string   // "" means dir is not confined
	paths     []string // parameters that name paths inside dir (worktype.PathKeyword)
	envParams []string // parameters passed as CHIFFON_PARAM_<NAME> in shell mode
	runAs     *runAsUser
	grace     time.Duration // cancel_grace
	gpu       *gpuHost      // measures the task's GPU memory; nil in a config check
}

func newSubprocess(name string, cfg WorkTypeConfig) (*subprocess, error) {
	s := &subprocess{name: name, cfg: cfg, grace: cfg.cancelGrace()}
	for i, arg := range cfg.Command {
		at := fmt.Sprintf("command[%d]", i)
		if arg.Optional != nil {
			if i == 0 {
				return nil, fmt.Errorf("%s: the program cannot be an optional group", at)
			}
			group, err := newOptionalGroup(name, at, arg.Optional, cfg.AllowOptionArgs)
			if err != nil {
				return nil, err
			}
			s.argv = append(s.argv, group...)
			continue
		}
		a, err := newArgTemplate(name, arg.Text, cfg.AllowOptionArgs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		a.at = at
		s.argv = append(s.argv, a)
	}
	t, err := template.New(name).Option("missingkey=error").Parse(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("dir: %w", err)
	}
	s.dir = t
	if s.dirBase, err = dirBaseOf(cfg, t); err != nil {
		return nil, err
	}
	if s.paths, err = worktype.PathParams(cfg.Schema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if len(s.paths) > 0 && cfg.Dir == "" {
		return nil, fmt.Errorf("schema: %s marks %s, a path inside the work type's dir: set dir",
			worktype.PathKeyword, strings.Join(s.paths, ", "))
	}
	if cfg.Shell != "" {
		if s.envParams, err = envParams(cfg.Schema); err != nil {
			return nil, err
		}
	}
	if s.runAs, err = lookupRunAs(cfg.RunAs); err != nil {
		return nil, err
	}
	return s, nil
}

// command builds the process for one request, or fails on bad parameters, or
// with a *startError when the host lacks the work type's dir.
func (s *subprocess) command(req *Request) (*exec.Cmd, []byte, error) {
	dir, err := s.renderDir(req)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPaths(dir, s.paths, req.Parameters); err != nil {
		return nil, nil, err
	}
	params, err := json.Marshal(req.Parameters)
	if err != nil {
		return nil, nil, err
	}
	argv := []string{"/bin/sh", "-c", s.cfg.Shell}
	if s.cfg.Shell == "" {
		if argv, err = s.renderArgv(req.Parameters); err != nil {
			return nil, nil, err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = s.env(req)
	return cmd, params, nil
}

// renderArgv renders Command, leaving out the optional groups whose parameters
// are not all there, and appends the AppendArgsFrom list, refusing an argument
// from a parameter that would be an option unless allow_option_args.
func (s *subprocess) renderArgv(params map[string]any) ([]string, error) {
	var argv []string
	for _, a := range s.argv {
		if a.leftOut(params) {
			continue
		}
		var b strings.Builder
		if err := a.t.Execute(&b, params); err != nil {
			return nil, fmt.Errorf("%s: %v", a.at, err)
		}
		if a.guarded && !s.cfg.AllowOptionArgs {
			if err := checkOptionArg(a.at, b.String(), a.params); err != nil {
				return nil, err
			}
		}
		argv = append(argv, b.String())
	}
	extra, err := stringList(params, s.cfg.AppendArgsFrom)
	if err != nil {
		return nil, err
	}
	if !s.cfg.AllowOptionArgs {
		for i, arg := range extra {
			what := fmt.Sprintf("append_args_from item %s[%d]", s.cfg.AppendArgsFrom, i)
			if err := checkOptionArg(what, arg, []string{s.cfg.AppendArgsFrom}); err != nil {
				return nil, err
			}
		}
	}
	return append(argv, extra...), nil
}

// renderDir renders Dir and, when it has a base, keeps it under the base. A
// dir that is not there is refused; when no parameter chose it, as a
// *startError.
func (s *subprocess) renderDir(req *Request) (string, error) {
	var b strings.Builder
	if err := s.dir.Execute(&b, req.Parameters); err != nil {
		return "", fmt.Errorf("dir: %v", err)
	}
	dir := b.String()
	if s.dirBase != "" {
		var err error
		if dir, err = confineDir(s.dirBase, dir, templateParams(s.dir)); err != nil {
			return "", err
		}
	}
	if dir == "" {
		return "", nil
	}
	if templated(s.dir) {
		if err := checkDir(dir, fromParams(templateParams(s.dir))); err != nil {
			return "", err
		}
		return dir, nil
	}
	if err := checkDir(dir, ""); err != nil {
		return "", &startError{fmt.Errorf("%w on this agent's host (work_types.%s.dir)", err, s.name)}
	}
	return dir, nil
}

// program names the command in messages.
func (s *subprocess) program() string {
	if s.cfg.Shell != "" {
		return "/bin/sh"
	}
	return s.cfg.Command[0].Text
}

// exitCannotStart is the exit code of a task whose process could not start, as
// a shell's for a command it cannot run.
const exitCannotStart = 127

// startError is a task that cannot start for a reason of the agent's host, not
// of its parameters: it ends as one whose process could not start.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// stringList reads the list parameter key ("" means none) as strings.
func stringList(params map[string]any, key string) ([]string, error) {
	if key == "" || params[key] == nil {
		return nil, nil
	}
	list, ok := params[key].([]any)
	if !ok {
		return nil, fmt.Errorf("parameter %s must be a list", key)
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case json.Number:
			out = append(out, v.String())
		default:
			return nil, fmt.Errorf("parameter %s must hold strings or numbers", key)
		}
	}
	return out, nil
}

// env is the whole environment of the process, never nil (a nil Cmd.Env would
// pass on the agent's): the allowlisted variables, the fixed ones, the task's
// ids and, in shell mode, the scalar parameters the schema declares as
// CHIFFON_PARAM_<NAME>.
func (s *subprocess) env(req *Request) []string {
	var env []string
	for _, k := range s.cfg.Env {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.cfg.SetEnv {
		env = append(env, k+"="+v)
	}
	env = append(env, "CHIFFON_TASK_ID="+req.TaskID, "CHIFFON_REQUEST_ID="+req.RequestID,
		"CHIFFON_TRACE_ID="+req.TraceID, "CHIFFON_WORK_TYPE="+req.WorkType)
	for _, k := range s.envParams {
		switch v := req.Parameters[k].(type) {
		case string, json.Number, bool:
			env = append(env, "CHIFFON_PARAM_"+strings.ToUpper(k)+"="+fmt.Sprint(v))
		}
	}
	return append(env, gpuEnv(req.GPU)...) // last: it wins over env and set_env
}

// run is the work type's Handler: it runs the process in its own process group,
// streams its stdout (through the line protocol) and stderr merged in one reader,
// and, when ctx ends or the process exits, kills every descendant left. When ctx
// ends first, the processes get SIGTERM and the grace before SIGKILL, and the error
// says how they ended (stoppedWork).
func (s *subprocess) run(ctx context.Context, req *Request, p Progress) (Result, error) {
	cmd, params, err := s.command(req)
	var cannot *startError
	if errors.As(err, &cannot) {
		return Result{ExitCode: exitCannotStart}, fmt.Errorf("start %s: %w", s.program(), err)
	}
	if err != nil {
		return Result{ExitCode: ExitInvalidParameters}, err
	}
	cred, err := s.runAs.credential(os.Geteuid())
	if err != nil {
		return Result{ExitCode: exitCannotStart}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	merged, err := newOutputMerge()
	if err != nil {
		return Result{ExitCode: exitCannotStart}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	cmd.Stdin = bytes.NewReader(params)
	cmd.Stdout, cmd.Stderr = merged.stdout, merged.stderr
	cmd.SysProcAttr = childSysProcAttr(cred)
	// Bounds the copy of params to a stdin that a process holds unread.
	cmd.WaitDelay = outputDrain
	tree, err := startProcessTree(cmd, req, s.grace)
	merged.closeWriteEnds()
	if err != nil {
		merged.close()
		return Result{ExitCode: exitCannotStart}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	lines := &lineProtocol{p: p}
	merged.start(lines, p)
	gpus := s.gpu.measure(req, tree.pids)
	exited := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tree.watch(ctx, exited)
	}()
	waitErr := cmd.Wait()
	close(exited)
	<-watched
	// The main process has exited, which freed its GPU memory: samples taken
	// while it ran are all there is.
	gpuPeak, gpuUses := gpus.stop()
	tree.end()
	// Read what the pipes hold, without waiting for a process that escaped the
	// tree and still holds them.
	merged.finish()
	lines.close()
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		waitErr = nil // stdin was left unread: not the program's failure
	}

	res := Result{ExitCode: cmd.ProcessState.ExitCode(), Structured: lines.structured(), GPUVRAMMB: gpuPeak, GPUs: gpuUses}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.CPUTime = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, waitErr
	}
	if ctx.Err() != nil && (res.ExitCode != 0 || tree.stop.stopped()) {
		// Our signal, not the program's own exit, even when it exits 0 on SIGTERM:
		// the runtime picks the exit code (130 cancelled, 124 deadline).
		res.ExitCode = 0
		if tree.stop.stopped() {
			return res, &stoppedWork{cause: context.Cause(ctx), how: tree.stop.String()}
		}
		return res, context.Cause(ctx)
	}
	return res, nil
}

// lineProtocol reads a process's stdout: "::progress N [step]" and "::step name"
// lines report progress; other lines are output. It remembers the last line for
// structured output. stderr does not pass through it: its lines are always output.
type lineProtocol struct {
	p     Progress
	buf   []byte // the current line so far
	shown int    // bytes of buf already output: stdout paused mid-line
	long  bool   // the current line passed maxLine: the rest of it is output as it comes
	last  []byte
	step  string
}

// maxLine is the longest line held back for the line protocol; longer text is
// output as it comes.
const maxLine = 64 << 10

func (l *lineProtocol) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.add(b)
			break
		}
		l.add(b[:i+1])
		l.end()
		b = b[i+1:]
	}
	return n, nil
}

// add adds part of the current line.
func (l *lineProtocol) add(b []byte) {
	if !l.long && len(l.buf)+len(b) > maxLine {
		_, _ = l.p.Write(l.buf[l.shown:])
		l.long, l.buf, l.shown, l.last = true, l.buf[:0], 0, nil
	}
	if l.long {
		_, _ = l.p.Write(b)
		return
	}
	l.buf = append(l.buf, b...)
}

// end ends the current line.
func (l *lineProtocol) end() {
	switch {
	case l.long:
		l.long = false
	case l.shown == 0:
		l.line(l.buf)
	default:
		_, _ = l.p.Write(l.buf[l.shown:])
		l.remember(string(l.buf))
	}
	l.buf, l.shown = l.buf[:0], 0
}

// pause outputs the part of the current line held so far, unless it may yet
// be a protocol line: stdout paused in the middle of a line.
func (l *lineProtocol) pause() {
	if l.long || l.shown == len(l.buf) {
		return
	}
	if l.shown == 0 {
		s := string(l.buf)
		for _, prefix := range []string{"::progress ", "::step "} {
			if strings.HasPrefix(s, prefix) || strings.HasPrefix(prefix, s) {
				return
			}
		}
	}
	_, _ = l.p.Write(l.buf[l.shown:])
	l.shown = len(l.buf)
}

func (l *lineProtocol) line(line []byte) {
	text := strings.TrimRight(string(line), "\r\n")
	if rest, ok := strings.CutPrefix(text, "::progress "); ok {
		pct, step, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if n, err := number(strings.TrimSuffix(pct, "%")); err == nil {
			if step = strings.TrimSpace(step); step != "" && step != l.step {
				l.step = step
				l.p.Step(step)
			}
			l.p.SetPercent(int(n))
			return
		}
	}
	if rest, ok := strings.CutPrefix(text, "::step "); ok && strings.TrimSpace(rest) != "" {
		l.step = strings.TrimSpace(rest)
		l.p.Step(l.step)
		return
	}
	l.remember(text)
	_, _ = l.p.Write(line)
}

// remember keeps a non-empty line as the last line.
func (l *lineProtocol) remember(text string) {
	if text = strings.TrimRight(text, "\r\n"); strings.TrimSpace(text) != "" {
		l.last = append(l.last[:0], text...)
	}
}

// close ends the last line, which has no newline.
func (l *lineProtocol) close() {
	if len(l.buf) > 0 || l.long {
		l.end()
	}
}

// structured returns the last stdout line when it is a JSON object or array.
func (l *lineProtocol) structured() any {
	t := bytes.TrimSpace(l.last)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') || !json.Valid(t) {
		return nil
	}
	var v any
	if json.Unmarshal(t, &v) != nil {
		return nil
	}
	return v
}
