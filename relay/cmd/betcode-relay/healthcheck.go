package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// newHealthcheckCmd is the container health check of the relay image
// (distroless: no shell, no curl): it asks this replica's metrics listener
// whether it is ready.
func newHealthcheckCmd() *cobra.Command {
	v := viper.New()
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the relay on this host is ready (its /readyz), 1 if not: a container health check",
		Long: `Ask the relay on this host, on its --metrics-listen port, for /readyz (or --path):
ready while it serves, not once it drains. It reads --metrics-listen like serve does
(BETCODE_RELAY_METRICS_LISTEN), so in the relay's container it needs no flag.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindViper(cmd, v); err != nil {
				return err
			}
			return healthcheck(cmd.Context(), v.GetString("metrics-listen"), v.GetString("path"), v.GetDuration("timeout"), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.String("metrics-listen", "", "the relay's --metrics-listen (host:port; an empty host means this host)")
	f.String("path", "/readyz", "/readyz (ready to take connections) or /healthz (alive)")
	f.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	f.String("config", "", "config file (the relay's: metrics-listen is read from it)")
	return cmd
}

// healthcheck GETs path on the metrics listener at addr and fails unless
// it answers 200.
func healthcheck(ctx context.Context, addr, path string, timeout time.Duration, out io.Writer) error {
	if addr == "" {
		return fmt.Errorf("healthcheck: no --metrics-listen (BETCODE_RELAY_METRICS_LISTEN): the relay serves /readyz there")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: --metrics-listen %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(out, "%s: %s", url, body)
	return nil
}
