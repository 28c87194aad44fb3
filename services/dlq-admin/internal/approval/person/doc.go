// Package person says which person an operator's token belongs to, so that
// four-eyes compares people, not credentials. A person may hold several
// dlq-admin tokens (a laptop's and a script's, an old and a new one); a
// second approver must be a different person, not a second token of the
// requester's. DLQ_ADMIN_TOKEN_PERSONS names each token's person
// ("token-name=person,…"); a token not listed is a person of its own name.
//
// Identities are compared normalised (Normalize): Unicode NFKC (so a
// full-width or ligature spelling is the same name), case folded, leading
// and trailing space dropped and inner runs of space made one, so that
// "ana", " Ana " and "ＡＮＡ" are one person. The comparison is made when an
// approval is decided, with the configuration the service runs with.
package person
