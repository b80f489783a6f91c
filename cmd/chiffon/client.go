package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
)

// DefaultDataDir is where `chiffon up` keeps its state, and where client commands look
// for the API's address and token when no flag or variable names them.
const DefaultDataDir = "chiffon-data"

// Files `chiffon up` writes into its data dir for the client commands.
const (
	apiURLFile   = "api.url"
	apiTokenFile = "secrets/" + siteAPIToken
)

// clientFlags say where the orchestrator's API is and how to authenticate to it.
type clientFlags struct {
	server    string
	tokenFile string
	caFile    string
	jsonOut   bool
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "orchestrator API URL (env CHIFFON_SERVER; default from ./chiffon-data, else http://127.0.0.1:8080)")
	cmd.Flags().StringVar(&f.tokenFile, "api-token-file", "", "file holding the API token (env CHIFFON_API_TOKEN holds the token itself; default ./chiffon-data/secrets/api.token)")
	cmd.Flags().StringVar(&f.caFile, "api-ca-file", "", "PEM file of the CA to trust for an https server, instead of the system's (env CHIFFON_API_CA_FILE)")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
}

// client resolves the API address and token: flags first, then the environment, then
// the files of a `chiffon up` running in this directory.
func (f *clientFlags) client() (*orchestrator.Client, error) {
	server := firstNonEmpty(f.server, os.Getenv("CHIFFON_SERVER"))
	if server == "" {
		if b, err := os.ReadFile(filepath.Join(DefaultDataDir, apiURLFile)); err == nil {
			server = strings.TrimSpace(string(b))
		}
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	hc, err := f.httpClient()
	if err != nil {
		return nil, err
	}
	return &orchestrator.Client{BaseURL: server, Token: token, HTTP: hc}, nil
}

// httpClient returns an HTTP client trusting only the CA of --api-ca-file, or nil
// (http.DefaultClient, with the system's CAs) without one.
func (f *clientFlags) httpClient() (*http.Client, error) {
	file := firstNonEmpty(f.caFile, os.Getenv("CHIFFON_API_CA_FILE"))
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--api-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--api-ca-file: %s holds no PEM certificate", file)
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
	tok, err := broker.ReadTokenFile(filepath.Join(DefaultDataDir, apiTokenFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no API token: pass --api-token-file or set CHIFFON_API_TOKEN (or run this where `chiffon up` keeps %s)", DefaultDataDir)
	}
	return tok, err
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
