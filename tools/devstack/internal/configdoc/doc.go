// Package configdoc writes docs/reference/configuration.md from the code
// that reads the environment, so the reference cannot drift from it.
//
// It reads the Go source of services/ and pkg/ (go/ast, no build): every
// call of a config.Env reader (String, Int, Uint32, Float, Bool, Duration,
// List, Lookup) and of a getenv parameter with a constant variable name is a
// variable; its default is the call's default argument, evaluated where it
// is a constant expression (constants of the repository's packages and
// time's units included; a parameter of the reader, such as ReadBase's
// defaultAddr, is evaluated at each service's call). A variable belongs to
// every service whose code reaches its reader, through calls into pkg/.
//
// A variable's meaning is written once, in the doc comment of a function
// that reads it, as a table of indented lines (a godoc code block):
//
//	// readConfig reads outbox-relay's settings:
//	//
//	//	RELAY_WORKERS     claim/publish loops in this process
//	//	RELAY_BATCH_SIZE  rows claimed per cycle; longer text
//	//	                  continues on lines indented past the name
//
// so the reader stays a plain list of env.Int("NAME", default) calls and
// its table sits right above it. Reads in files with build constraints that
// a default build excludes (the chaos build's planted defects) are not
// configuration, and neither is anything listed in notConfiguration.
//
// cmd/aegis-configdoc (make generate) writes the file; this package's test
// fails, in the normal go test run, when the committed file is stale or a
// variable has no meaning or two.
package configdoc
