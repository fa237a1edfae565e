// Package pki creates and extends the relay's certificate authority: the
// logic behind `betcode-relay certs`, and the CA (LoadCA) with which a relay
// holding the CA key signs the CSRs of enrolling machines
// (CA.SignMachineCSR, for relay/enrollsvc). It is pure Go (crypto/x509 with
// ECDSA P-256 keys); no openssl.
//
// A PKI directory holds
//
//	ca.crt, ca.key             the CA (10 years)
//	relay.crt, relay.key       the relay's server certificate (1 year)
//	machines/<ID>.crt, .key    one client certificate per agent machine (1 year)
//
// Keys are written 0600 and certificates 0644, in PEM (keys as PKCS #8).
// Nothing is overwritten unless Options.Force is set. A machine certificate
// names its machine as the subject CN and as the URI SAN
// betcode://machine/<ID> (see shared/mtls, which reads it back), and, with
// Options.Owner, its owner as the URI SAN betcode://owner/user/<NAME> or
// betcode://owner/team/<NAME>. Lifetimes, enrollment and rotation are
// documented in docs/certificates.md.
package pki
