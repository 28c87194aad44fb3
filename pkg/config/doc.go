// Package config reads a service's settings from environment variables.
//
// Services parse one Config struct in run() and nowhere else: constructors take
// values, never read the environment. Every problem is collected and reported
// at once, each naming the variable, so an operator fixes a bad deployment in
// one round instead of one variable per restart.
//
// Domain packages validate their own Config but do not know environment
// variable names: their Validate returns FieldErrors naming Go fields
// ("Backoff.Base must be positive"), and the service's readConfig, which
// mapped each variable to its field, hands that result to Env.Check with the
// same mapping, so the operator reads "PSP_BACKOFF_BASE must be positive".
package config
