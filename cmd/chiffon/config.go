package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// newConfigCmd is `chiffon config check`.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with daemon config files"}
	var kind string
	check := &cobra.Command{
		Use:   "check FILE...",
		Short: "Validate agent, orchestrator or broker config files, naming the key of each error",
		Long: `Reads each file strictly (unknown keys are errors) and checks every value. The kind
is told by the file (an agent config has a "type" key; the broker's, such as the
broker.conf chiffon init writes, is a nats-server config, read as chiffon broker
--config reads it, with its TLS files) unless --kind says it. Token
files that cannot be read here, commands of subprocess work types not found on this
host's PATH, and their dirs that are not directories here, are reported as warnings:
they may live on another host, or be mounted later (the agent's unit runs this check
before it starts).
Exits 0 when every file is valid, 1 when any is not, 2 on a usage error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind != "" && kind != "agent" && kind != "orchestrator" && kind != "broker" {
				return usagef("--kind must be agent, orchestrator or broker")
			}
			ok := true
			for _, path := range args {
				ok = checkConfigFile(cmd.OutOrStdout(), path, kind) && ok
			}
			if !ok {
				return exitCode(1, nil)
			}
			return nil
		},
	}
	check.Flags().StringVar(&kind, "kind", "", "agent, orchestrator or broker (default: told by the file)")
	cmd.AddCommand(check)
	return cmd
}

// checkConfigFile prints "<path>: ok (...)" or one line per error, and reports validity.
func checkConfigFile(w io.Writer, path, kind string) bool {
	if kind == "" {
		var err error
		if kind, err = configKind(path); err != nil {
			fmt.Fprintf(w, "%s: %v\n", path, err)
			return false
		}
	}
	var (
		desc       string
		tokenFiles map[string]string
		missing    []string // work types' commands not found on this host
		err        error
	)
	switch kind {
	case "broker":
		if desc, err = broker.CheckServerFile(path); err != nil {
			fmt.Fprintf(w, "%s: broker config: %v\n", path, err)
			return false
		}
	case "agent":
		var c agent.Config
		if c, err = agent.LoadConfig(path); err == nil {
			desc = fmt.Sprintf("agent %s (%s), work types: %s", c.ID, c.Type, strings.Join(slices.Sorted(maps.Keys(c.WorkTypes)), ", "))
			tokenFiles = map[string]string{"token_file": c.TokenFile, "orchestrator_token_file": c.OrchestratorTokenFile}
			addNATSFiles(tokenFiles, c.NATS)
			missing = append(missingCommands(c.WorkTypes, exec.LookPath), missingDirs(c.WorkTypes)...)
		}
	default:
		var c orchestrator.Config
		if c, err = orchestrator.LoadConfig(path); err == nil {
			desc = fmt.Sprintf("orchestrator, %d agents allowed", len(c.Agents))
			tokenFiles = map[string]string{"api_token_file": c.APITokenFile}
			for i, a := range c.Agents {
				tokenFiles[fmt.Sprintf("agents[%d].token_file", i)] = a.TokenFile
				tokenFiles[fmt.Sprintf("agents[%d].orchestrator_token_file", i)] = a.OrchestratorTokenFile
			}
			addNATSFiles(tokenFiles, c.NATS)
		}
	}
	if err != nil {
		// LoadConfig names the file itself; print each problem on a line of its own,
		// naming the key of a YAML error that gives only a line number.
		src, _ := os.ReadFile(path)
		msg := strings.TrimPrefix(err.Error(), "config "+path+": ")
		for _, line := range strings.Split(msg, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line == "yaml: unmarshal errors:" {
				continue
			}
			fmt.Fprintf(w, "%s: %s\n", path, withKey(src, line))
		}
		return false
	}
	fmt.Fprintf(w, "%s: ok: %s\n", path, desc)
	for _, key := range slices.Sorted(maps.Keys(tokenFiles)) {
		file := tokenFiles[key]
		if file == "" {
			continue
		}
		if _, err := os.Stat(file); err != nil {
			fmt.Fprintf(w, "%s: warning: %s: %s is not readable here\n", path, key, file)
		}
	}
	for _, m := range missing {
		fmt.Fprintf(w, "%s: warning: %s\n", path, m)
	}
	return true
}

// paramCommand is a command element that is one parameter: its schema's enum lists
// the commands it may name.
var paramCommand = regexp.MustCompile(`^\{\{\s*\.(\w+)\s*\}\}$`)

// missingCommands names each subprocess work type whose command lookPath does not find:
// a literal command, or each one a templated command's schema enum allows. A relative
// path with a slash depends on the work type's dir and is not looked at.
func missingCommands(wts map[string]agent.WorkTypeConfig, lookPath func(string) (string, error)) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(wts)) {
		wt := wts[name]
		if len(wt.Command) == 0 {
			continue // a shell script, run by /bin/sh
		}
		program := wt.Command[0].Text
		cmds := []string{program}
		if m := paramCommand.FindStringSubmatch(program); m != nil {
			cmds = schemaEnum(wt.Schema, m[1])
		} else if strings.Contains(program, "{{") {
			continue
		}
		for _, c := range cmds {
			if c == "" || (strings.Contains(c, "/") && !filepath.IsAbs(c)) {
				continue
			}
			if _, err := lookPath(c); err != nil {
				where := "on this host's PATH"
				if filepath.IsAbs(c) {
					where = "an executable file here"
				}
				out = append(out, fmt.Sprintf("work_types.%s: command %s is not %s", name, c, where))
			}
		}
	}
	return out
}

// missingDirs names each subprocess work type whose dir (or a templated dir's
// base) is not a directory here.
func missingDirs(wts map[string]agent.WorkTypeConfig) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(wts)) {
		if err := wts[name].CheckDir(); err != nil {
			out = append(out, fmt.Sprintf("work_types.%s: %v on this host", name, err))
		}
	}
	return out
}

// schemaEnum returns the string values of properties.<param>.enum in a JSON Schema.
func schemaEnum(schema map[string]any, param string) []string {
	props, _ := schema["properties"].(map[string]any)
	p, _ := props[param].(map[string]any)
	enum, _ := p["enum"].([]any)
	var out []string
	for _, v := range enum {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// addNATSFiles adds the identity and TLS files of a nats section to files.
func addNATSFiles(files map[string]string, c broker.NATSConfig) {
	for key, f := range map[string]string{"nats.nkey_file": c.NKeyFile, "nats.creds_file": c.CredsFile,
		"nats.tls.ca_file": c.TLS.CAFile, "nats.tls.cert_file": c.TLS.CertFile, "nats.tls.key_file": c.TLS.KeyFile} {
		files[key] = f
	}
}

// configKind tells an agent config (it has a type key) from an orchestrator's,
// and both from the broker's (a nats-server config).
func configKind(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil || filepath.Ext(path) == ".conf" {
		// The broker's config is nats-server's own format, not YAML.
		if broker.LooksLikeServerFile(path) {
			return "broker", nil
		}
		if err != nil {
			return "", fmt.Errorf("not YAML: %v (nor a nats-server config, as the broker's broker.conf is)", err)
		}
	}
	if _, ok := top["type"]; ok {
		return "agent", nil
	}
	return "orchestrator", nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// withKey rewrites a YAML error "line N: ..." as "line N: <key>: ...", where key is the
// dotted path of the key on that line.
func withKey(src []byte, msg string) string {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 {
		return msg
	}
	key := keyAtLine(root.Content[0], n, "")
	if key == "" {
		return msg
	}
	rest := strings.TrimPrefix(msg, m[0])
	if f := unknownField.FindStringSubmatch(rest); f != nil {
		rest = "unknown key"
	}
	return m[0] + key + ": " + rest
}

var unknownField = regexp.MustCompile(`^field (\S+) not found in type`)

// keyAtLine finds the dotted path of the mapping key written on line n.
func keyAtLine(node *yaml.Node, n int, prefix string) string {
	switch node.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			path := k.Value
			if prefix != "" {
				path = prefix + "." + k.Value
			}
			if k.Line == n {
				return path
			}
			if found := keyAtLine(v, n, path); found != "" {
				return found
			}
		}
	case yaml.SequenceNode:
		for i, c := range node.Content {
			if found := keyAtLine(c, n, fmt.Sprintf("%s[%d]", prefix, i)); found != "" {
				return found
			}
		}
	}
	return ""
}
