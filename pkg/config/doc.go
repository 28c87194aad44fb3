// Package config reads a service's settings from environment variables.
//
// Services parse one Config struct in run() and nowhere else: constructors take
// values, never read the environment. Every problem is collected and reported
// at once, each naming the variable, so an operator fixes a bad deployment in
// one round instead of one variable per restart.
package config
