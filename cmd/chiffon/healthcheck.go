package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd is `chiffon healthcheck`.
func newHealthcheckCmd() *cobra.Command {
	var (
		url, file, caFile string
		maxAge            time.Duration
		timeout           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck (--url URL | --file PATH)",
		Short: "Exit 0 when a daemon is healthy: for container and service-manager probes",
		Long: `With --url, GETs the URL (such as the orchestrator's /readyz) and succeeds on a 2xx
answer. With --file, succeeds when the file (an agent's <data_dir>/heartbeat, rewritten
at every heartbeat sent while connected) is younger than --max-age.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (url == "") == (file == "") {
				return usagef("give exactly one of --url and --file")
			}
			var err error
			if url != "" {
				err = checkURL(cmd.Context(), url, caFile, timeout)
			} else {
				err = checkFileAge(file, maxAge, time.Now())
			}
			if err != nil {
				return exitCode(1, err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), "healthy")
			return err
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "URL to GET, such as http://127.0.0.1:8080/readyz")
	cmd.Flags().StringVar(&caFile, "api-ca-file", "", "PEM file of the CA an https URL's certificate chains to, instead of the system's")
	cmd.Flags().StringVar(&file, "file", "", "heartbeat file of an agent")
	cmd.Flags().DurationVar(&maxAge, "max-age", 30*time.Second, "oldest acceptable heartbeat file")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "HTTP timeout")
	return cmd
}

func checkURL(ctx context.Context, url, caFile string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	hc := http.DefaultClient
	if caFile != "" {
		if hc, err = (&clientFlags{caFile: caFile}).httpClient(""); err != nil {
			return err
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

func checkFileAge(path string, maxAge time.Duration, now time.Time) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if age := now.Sub(st.ModTime()); age > maxAge {
		return fmt.Errorf("%s is %s old, over %s", path, age.Round(time.Second), maxAge)
	}
	return nil
}
