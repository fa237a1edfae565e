// Package mtls holds the TLS settings shared by the relay and the agent, and
// the rule that turns a verified client certificate into a machine id.
//
// Agents dial out to the relay and prove who they are with a client
// certificate issued by the relay's CA (see relay/pki and
// docs/certificates.md). The certificate names the machine twice: as the
// subject CN and as a URI SAN
//
//	betcode://machine/<ID>
//
// The URI SAN is the identity; the CN is for humans reading the certificate.
// The relay takes the machine id from the verified certificate only
// (MachineID, MachineIDFromPeer), never from a request field, so an agent
// cannot register as another machine.
//
// A development certificate (betcode-relay certs machine --owner) may also
// name the machine's owner, a user or a team, as a second URI SAN
//
//	betcode://owner/user/<NAME>    or    betcode://owner/team/<NAME>
//
// which MachineOwner reads, from the verified certificate too. Enrolled
// machines carry no owner SAN: the relay records their owner when it signs
// their certificate.
//
// The relay serves agents and plain clients (which have no certificate) on one
// port, so it runs in VerifyClientCertIfGiven mode: a presented certificate
// must chain to the CA, but none is required by the handshake. Services that
// need a machine call MachineIDFromPeer, which fails with ErrNoClientCert when
// the connection carries no verified client certificate.
package mtls
