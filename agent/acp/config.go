package acp

import "github.com/betcode-dev/betcode/agent/provider"

var _ provider.ConfigChecker = (*Provider)(nil)

// CheckConfig reports whether config names a configured agent (or names
// none while exactly one is configured).
func (p *Provider) CheckConfig(config map[string]string) error {
	_, err := p.agent(config)
	return err
}
