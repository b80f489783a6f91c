package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/spf13/cobra"
)

// newEnvelopeCmd is `chiffon envelope`, with its subcommands validate and new.
func newEnvelopeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Validate and build protocol envelopes",
	}
	cmd.AddCommand(newEnvelopeValidateCmd(), newEnvelopeNewCmd())
	return cmd
}

// newEnvelopeValidateCmd is `chiffon envelope validate`.
func newEnvelopeValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [FILE|-]...",
		Short: "Check envelopes against every protocol rule",
		Long: `Reads JSON Lines (one envelope per line) from each FILE, or from standard input
when no FILE or "-" is given. A file may instead hold one pretty-printed envelope.

Prints one line per message, in order: "ok", or "invalid <code> <field>: <message>",
where field is a dotted JSON path, or "-" when the text is not a JSON object.
Exits 0 when every message is ok, 1 when any is invalid, 2 on a usage or I/O error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"-"}
			}
			out := cmd.OutOrStdout()
			allOK := true
			for _, name := range args {
				data, err := readInput(name, cmd.InOrStdin())
				if err != nil {
					return exitCode(2, err)
				}
				for _, msg := range splitMessages(data) {
					line := validateLine(msg)
					allOK = allOK && line == "ok"
					fmt.Fprintln(out, line)
				}
			}
			if !allOK {
				return exitCode(1, nil)
			}
			return nil
		},
	}
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// splitMessages returns the messages of one input: the whole input when it is one
// pretty-printed object, its non-blank lines otherwise.
func splitMessages(data []byte) [][]byte {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil
	}
	firstLine, _, multiline := bytes.Cut(trimmed, []byte("\n"))
	if multiline && (string(bytes.TrimSpace(firstLine)) == "{" || json.Valid(trimmed)) {
		return [][]byte{trimmed}
	}
	var msgs [][]byte
	for _, line := range bytes.Split(trimmed, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			msgs = append(msgs, line)
		}
	}
	return msgs
}

func validateLine(msg []byte) string {
	_, err := envelope.Decode(msg)
	if err == nil {
		return "ok"
	}
	var e *errcodes.Error
	if !errors.As(err, &e) {
		return "invalid 5003 -: " + err.Error()
	}
	field := e.Field()
	if field == "" {
		field = "-"
	}
	return fmt.Sprintf("invalid %d %s: %s", int(e.Code), field, e.Message)
}

// newEnvelopeNewCmd is `chiffon envelope new`.
func newEnvelopeNewCmd() *cobra.Command {
	var (
		typ, from, to, workType, paramsJSON string
		taskID, requestID, traceID, reason  string
		params, hints                       []string
		pretty                              bool
	)
	cmd := &cobra.Command{
		Use:   "new --type TYPE --to AGENT_TYPE [flags]",
		Short: "Print a valid envelope, for scripting against Chiffon with any NATS client",
		Long: `Builds one envelope with a fresh message_id and timestamp and prints it as JSON.
Types: work_request (needs --work-type), cancel (needs --task-id), ping, drain.

--param k=v sets a string parameter; --param k:=JSON sets any JSON value (k:=5,
k:=true, k:='{"a":1}'). --hint works the same way; max_duration_seconds and
max_memory_mb take integers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := buildPayload(typ, taskID, workType, reason, paramsJSON, params, hints)
			if err != nil {
				return err
			}
			e := envelope.New(envelope.AgentType(from), envelope.AgentType(to), requestID, traceID, p)
			data, err := envelope.Encode(e)
			if err != nil {
				return err
			}
			if _, err := envelope.Decode(data); err != nil {
				return usagef(err.Error())
			}
			if pretty {
				var buf bytes.Buffer
				_ = json.Indent(&buf, data, "", "  ")
				data = buf.Bytes()
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(data))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", string(envelope.TypeWorkRequest), "message type: work_request, cancel, ping, drain")
	f.StringVar(&from, "from", string(envelope.Orchestrator), "sender type")
	f.StringVar(&to, "to", "", "recipient type: infra, desktop, code, research, orchestrator")
	f.StringVar(&workType, "work-type", "", "work_type of a work_request")
	f.StringArrayVar(&params, "param", nil, "parameter k=v (string) or k:=JSON; repeatable")
	f.StringVar(&paramsJSON, "params-json", "", "parameters as one JSON object, merged under --param")
	f.StringArrayVar(&hints, "hint", nil, "hint k=v or k:=JSON; repeatable")
	f.StringVar(&taskID, "task-id", "", "task id (default: a new UUID for work_request)")
	f.StringVar(&requestID, "request-id", "", "request id (default: a new UUID)")
	f.StringVar(&traceID, "trace-id", "", "trace id (default: a new UUID)")
	f.StringVar(&reason, "reason", "", "reason of a cancel")
	f.BoolVar(&pretty, "pretty", false, "indent the JSON")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func buildPayload(typ, taskID, workType, reason, paramsJSON string, params, hints []string) (envelope.Payload, error) {
	switch envelope.Type(typ) {
	case envelope.TypeWorkRequest:
		if taskID == "" {
			taskID = envelope.NewID()
		}
		p := &envelope.WorkRequest{TaskID: taskID, WorkType: workType}
		m, err := parseKeyValues(paramsJSON, params, nil)
		if err != nil {
			return nil, usagef("--param: " + err.Error())
		}
		p.Parameters = m
		if len(hints) > 0 {
			if p.Hints, err = parseHints(hints); err != nil {
				return nil, usagef("--hint: " + err.Error())
			}
		}
		return p, nil
	case envelope.TypeCancel:
		return &envelope.Cancel{TaskID: taskID, Reason: reason}, nil
	case envelope.TypePing:
		return &envelope.Ping{}, nil
	case envelope.TypeDrain:
		return &envelope.Drain{}, nil
	}
	return nil, usagef(fmt.Sprintf("--type %q: must be work_request, cancel, ping or drain", typ))
}
