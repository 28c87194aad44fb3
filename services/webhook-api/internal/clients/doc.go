// Package clients knows who may call webhook-api's /v1 API and for whom. An
// API client is a name with one or more bearer tokens and a scope: the user
// ids whose wallets, payouts and destinations it may touch. Everything is
// declared in API_TOKENS, so credentials live where the deployment's other
// secrets live and a change is a reviewed, rolling configuration change:
//
//	API_TOKENS="shop(shop-*|vip-42):<token>,shop:<new token>,support(*):<token>"
//
// Each entry is client[(scope)]:token. A scope is a |-separated list of user
// ids, prefixes ending in * (shop-* is every id starting with "shop-") or *
// (every user). A client listed several times has several tokens (rotation:
// all of them work, and all act as the same client, so its Idempotency-Keys
// and scope do not change with the token); its scope is written on any or
// all of its entries, identically.
//
// Safety of the old format: a bare name:token (no scope on any of the
// client's entries) keeps its old meaning, every user, only when it is the
// only client configured: then there is no other client whose users it could
// reach. As soon as a second client exists, every client must state its
// scope (use name(*) to keep "every user" on purpose), and the service
// refuses to start otherwise, naming the client.
//
// Scopes are checked before anything is read or written: a request outside
// its client's scope is answered 403 and leaves no trace but a log line.
package clients
