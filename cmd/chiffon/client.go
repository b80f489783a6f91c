package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/cobra"
)

// DefaultDataDir is where `chiffon up` keeps its state, and where client commands look
// for the API's address and token when no flag or variable names them.
const DefaultDataDir = "chiffon-data"

// clientDataDirEnv is, for client commands, the data dir of a `chiffon up`: where the
// API's address and token are. The agent and orchestrator daemons read the same
// variable as their own data dir.
const clientDataDirEnv = "CHIFFON_DATA_DIR"

// apiTokenFileEnv names the file of the API token, for client commands as for the
// orchestrator, which reads it as its --api-token-file.
const apiTokenFileEnv = "CHIFFON_API_TOKEN_FILE"

// Files `chiffon up` writes into its data dir for the client commands.
const (
	apiURLFile = "api.url"
	// apiRemoteURLFile is the API's URL for other hosts, such as the join
	// line of `chiffon enroll` names: api.url's unless up listens on every
	// address.
	apiRemoteURLFile = "api.remote.url"
	apiTokenFile     = "secrets/" + site.APIToken
	// apiCAFile is the site CA, which the API's certificate chains to when up
	// serves HTTPS (--host beyond loopback).
	apiCAFile = "secrets/" + site.CA
)

// clientFlags say where the orchestrator's API is and how to authenticate to it.
type clientFlags struct {
	server    string
	tokenFile string
	caFile    string
	dataDir   string
	jsonOut   bool
}

// add defines the client flags on cmd and wraps its RunE so that an unreachable
// server is reported with the ways to point the CLI at one, a certificate or
// scheme it cannot use with what to change, and a parameter error
// exits with exitParamError. Call it after RunE is set.
func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "orchestrator API URL, or the comma-separated URLs of a group's orchestrators, tried in turn (env CHIFFON_SERVER; default from the data dir's api.url, else http://127.0.0.1:8080)")
	cmd.Flags().StringVar(&f.tokenFile, "api-token-file", "", "file holding the API token (env CHIFFON_API_TOKEN holds the token itself, "+apiTokenFileEnv+" names a file; default the data dir's secrets/api.token)")
	cmd.Flags().StringVar(&f.caFile, "api-ca-file", "", "PEM file of the CA to trust for an https server, instead of the system's (env CHIFFON_API_CA_FILE)")
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "data dir of a chiffon up, where its api.url and secrets/api.token are (env "+clientDataDirEnv+"; default ./"+DefaultDataDir+")")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON; errors too, as JSON on stderr")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return explainParams(explainConnection(explainUnreachable(run(cmd, args))))
	}
}

// upDataDir returns the data dir of a `chiffon up` to read, and whether it was named
// by a flag or the environment rather than defaulted.
func (f *clientFlags) upDataDir() (dir string, named bool) {
	if d := firstNonEmpty(f.dataDir, os.Getenv(clientDataDirEnv)); d != "" {
		return d, true
	}
	return DefaultDataDir, false
}

// remoteURL is the API's URL for other hosts when the client reads a `chiffon
// up`'s data dir (its api.remote.url), else "".
func (f *clientFlags) remoteURL() string {
	if firstNonEmpty(f.server, os.Getenv("CHIFFON_SERVER")) != "" {
		return ""
	}
	dir, _ := f.upDataDir()
	b, err := os.ReadFile(filepath.Join(dir, apiRemoteURLFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// client resolves the API address, token and CA: flags first, then the environment,
// then the files of a `chiffon up` in the data dir. An address read from the data
// dir is trusted with the data dir's site CA, unless a CA is named.
func (f *clientFlags) client() (*client.Client, error) {
	server := firstNonEmpty(f.server, os.Getenv("CHIFFON_SERVER"))
	var siteCAFile string
	if server == "" {
		dir, named := f.upDataDir()
		b, err := os.ReadFile(filepath.Join(dir, apiURLFile))
		switch {
		case err == nil:
			server = strings.TrimSpace(string(b))
			if _, err := os.Stat(filepath.Join(dir, apiCAFile)); err == nil {
				siteCAFile = filepath.Join(dir, apiCAFile)
			}
		case named:
			return nil, fmt.Errorf("no API address in %s: %w (is `chiffon up --data-dir %s` running? or pass --server)", dir, err, dir)
		}
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	servers := serverURLs(server)
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	hc, err := f.httpClient(siteCAFile)
	if err != nil {
		return nil, err
	}
	return &client.Client{BaseURL: servers[0], Servers: servers[1:], Patience: clientPatience, Token: token, HTTP: hc}, nil
}

// clientPatience is how long a write goes on trying while the orchestrators
// that answer say 503 (a takeover under way): a group's lease is 20 s by
// default, and a standby takes over within a lease and a second of the
// leader's crash.
const clientPatience = 45 * time.Second

// serverURLs splits a --server list at its commas; a URL without a scheme is
// http://.
func serverURLs(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		out = []string{"http://127.0.0.1:8080"}
	}
	return out
}

// httpClient returns an HTTP client trusting only the CA of --api-ca-file (or
// CHIFFON_API_CA_FILE, else defaultCA), or nil (http.DefaultClient, with the
// system's CAs) without one.
func (f *clientFlags) httpClient(defaultCA string) (*http.Client, error) {
	file := firstNonEmpty(f.caFile, os.Getenv("CHIFFON_API_CA_FILE"), defaultCA)
	if file == "" {
		return nil, nil
	}
	pool, err := broker.LoadCertPool(file)
	if err != nil {
		return nil, fmt.Errorf("--api-ca-file: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

func (f *clientFlags) token() (string, error) {
	if f.tokenFile != "" {
		return broker.ReadTokenFile(f.tokenFile)
	}
	if tok := os.Getenv("CHIFFON_API_TOKEN"); tok != "" {
		return strings.TrimSpace(tok), nil
	}
	if file := os.Getenv(apiTokenFileEnv); file != "" {
		tok, err := broker.ReadTokenFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", apiTokenFileEnv, err)
		}
		return tok, nil
	}
	dir, _ := f.upDataDir()
	tok, err := broker.ReadTokenFile(filepath.Join(dir, apiTokenFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no API token in %s: pass --api-token-file, set CHIFFON_API_TOKEN or "+apiTokenFileEnv+", or --data-dir (%s) naming the data dir of a `chiffon up`", dir, clientDataDirEnv)
	}
	return tok, err
}

// unreachableError is a request that found no server listening.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string {
	return e.err.Error() + "\n  is the orchestrator running? Point the CLI at it with --server URL (or CHIFFON_SERVER)" +
		" and --api-token-file FILE, or at the data dir of a `chiffon up` with --data-dir DIR (or " + clientDataDirEnv + ")"
}

func (e *unreachableError) Unwrap() error { return e.err }

// explainUnreachable adds to a refused connection how to point the CLI at a server.
func explainUnreachable(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &unreachableError{err: err}
	}
	return err
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
