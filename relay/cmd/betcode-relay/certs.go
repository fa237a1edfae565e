package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/relay/pki"
)

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a development PKI: a CA, the relay's certificate, machine certificates",
	}
	var dir, hosts, machineID, owner string
	var force bool
	printResult := func(cmd *cobra.Command, r *pki.Result) {
		for _, f := range r.Files {
			fmt.Fprintln(cmd.OutOrStdout(), "wrote", f)
		}
	}
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Write a CA and the relay's server certificate and key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := pki.Init(dir, strings.Split(hosts, ","), pki.Options{Force: force})
			if err != nil {
				return err
			}
			printResult(cmd, r)
			return nil
		},
	}
	machineCmd := &cobra.Command{
		Use:   "machine",
		Short: "Write a machine's client certificate and key, signed by the CA in --dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := pki.IssueMachine(dir, machineID, pki.Options{Force: force, Owner: owner})
			if err != nil {
				return err
			}
			printResult(cmd, r)
			return nil
		},
	}
	relayCmd := &cobra.Command{
		Use:   "relay",
		Short: "Reissue the relay's server certificate with the existing CA",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := pki.IssueRelay(dir, strings.Split(hosts, ","), pki.Options{Force: force})
			if err != nil {
				return err
			}
			printResult(cmd, r)
			return nil
		},
	}
	for _, c := range []*cobra.Command{initCmd, machineCmd, relayCmd} {
		c.Flags().StringVar(&dir, "dir", "certs/dev", "directory of the PKI")
		c.Flags().BoolVar(&force, "force", false, "replace existing files")
	}
	initCmd.Flags().StringVar(&hosts, "hosts", "localhost,127.0.0.1", "names and addresses of the relay (comma-separated)")
	relayCmd.Flags().StringVar(&hosts, "hosts", "localhost,127.0.0.1", "names and addresses of the relay (comma-separated)")
	machineCmd.Flags().StringVar(&machineID, "machine-id", "", "the machine's id ([A-Za-z0-9._-], up to 64)")
	_ = machineCmd.MarkFlagRequired("machine-id")
	machineCmd.Flags().StringVar(&owner, "owner", "", "who owns the machine, user:NAME or team:NAME (the certificate carries it as the URI SAN betcode://owner/user/NAME or .../team/NAME)")
	cmd.AddCommand(initCmd, machineCmd, relayCmd)
	return cmd
}
