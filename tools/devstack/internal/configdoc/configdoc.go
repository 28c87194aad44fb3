package configdoc

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// OutPath is where the reference lives, relative to the repository root.
const OutPath = "docs/reference/configuration.md"

// readerMethods are config.Env's typed readers; the first argument is the
// variable's name, the second (where there is one) its default.
func readerMethods() map[string]bool {
	return map[string]bool{"String": true, "Int": true, "Uint32": true, "Float": true, "Bool": true,
		"Duration": true, "List": true, "Lookup": true}
}

// Variable is one environment variable in the reference.
type Variable struct {
	Name string
	// Defaults maps each service that reads it to its default, as shown.
	Defaults map[string]string
	// Services read it.
	Services []string
	// Meaning is its description; Where is the file that holds it.
	Meaning, Where string
}

// read is one read of a variable in a function.
type read struct {
	name, method string
	def          ast.Expr // nil: no default
	param        int      // index of the reader's parameter the default is, or -1
	file         *file
}

type file struct {
	pkg     *pkg
	path    string // relative to the root
	imports map[string]string
	ast     *ast.File
}

type pkg struct {
	path, dir string
	consts    map[string]value
	files     []*file
}

// value is a package-level constant's (or variable's) expression and the
// file it is declared in, whose imports it is evaluated with.
type value struct {
	expr ast.Expr
	file *file
}

type fn struct {
	key, method string // method: the method's name, "" for a function
	pkg         *pkg
	service     string // the service whose directory holds it, "" for pkg/
	reads       []read
	calls       []call
	docs        map[string]string
	docFile     string
}

type call struct {
	target string // a function's key, or "." + a method's name
	args   []ast.Expr
	file   *file
}

type loader struct {
	root    string
	fset    *token.FileSet
	modules map[string]string // module path -> directory
	pkgs    map[string]*pkg   // import path -> package
	fns     map[string]*fn
	methods map[string][]*fn
}

// Generate returns the reference for the repository at root.
func Generate(root string) ([]byte, error) {
	vars, err := Collect(root)
	if err != nil {
		return nil, err
	}
	return render(vars), nil
}

// Collect finds every variable the services read, with its defaults,
// readers and meaning. A variable without a meaning, or with two, is an
// error.
func Collect(root string) ([]Variable, error) {
	l := &loader{root: root, fset: token.NewFileSet(), modules: map[string]string{}, pkgs: map[string]*pkg{},
		fns: map[string]*fn{}, methods: map[string][]*fn{}}
	if err := l.readModules(); err != nil {
		return nil, err
	}
	for _, dir := range []string{"pkg", "services"} {
		if err := l.walk(filepath.Join(root, dir)); err != nil {
			return nil, err
		}
	}
	return l.variables()
}

func (l *loader) readModules() error {
	work, err := os.ReadFile(filepath.Join(l.root, "go.work"))
	if err != nil {
		return fmt.Errorf("read go.work: %w", err)
	}
	use := regexp.MustCompile(`(?m)^\s*(\./\S+)\s*$`)
	modLine := regexp.MustCompile(`(?m)^module\s+(\S+)`)
	for _, m := range use.FindAllStringSubmatch(string(work), -1) {
		dir := filepath.Join(l.root, m[1])
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return fmt.Errorf("read %s/go.mod: %w", m[1], err)
		}
		if mm := modLine.FindStringSubmatch(string(mod)); mm != nil {
			l.modules[mm[1]] = dir
		}
	}
	return nil
}

// importPath is the import path of dir.
func (l *loader) importPath(dir string) string {
	best, path := "", ""
	for mod, mdir := range l.modules {
		if rel, err := filepath.Rel(mdir, dir); err == nil && !strings.HasPrefix(rel, "..") && len(mdir) > len(best) {
			best, path = mdir, mod
			if rel != "." {
				path += "/" + filepath.ToSlash(rel)
			}
		}
	}
	return path
}

func (l *loader) walk(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return l.load(p)
		}
		return nil
	})
}

// inDefaultBuild reports whether a file's build constraint holds without
// build tags.
func inDefaultBuild(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				expr, err := constraint.Parse(c.Text)
				if err != nil {
					return false
				}
				return expr.Eval(func(tag string) bool {
					return tag == "linux" || tag == "unix" || tag == "gc" || tag == "amd64" || strings.HasPrefix(tag, "go1.")
				})
			}
		}
	}
	return true
}

func (l *loader) load(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	p := &pkg{path: l.importPath(dir), dir: dir, consts: map[string]value{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		af, err := parser.ParseFile(l.fset, path, nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		if !inDefaultBuild(af) {
			continue
		}
		rel, _ := filepath.Rel(l.root, path)
		f := &file{pkg: p, path: filepath.ToSlash(rel), imports: map[string]string{}, ast: af}
		for _, imp := range af.Imports {
			ip := strings.Trim(imp.Path.Value, `"`)
			name := ip[strings.LastIndex(ip, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			f.imports[name] = ip
		}
		p.files = append(p.files, f)
		for _, d := range af.Decls {
			if g, ok := d.(*ast.GenDecl); ok && (g.Tok == token.CONST || g.Tok == token.VAR) {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							p.consts[n.Name] = value{expr: vs.Values[i], file: f}
						}
					}
				}
			}
		}
	}
	if len(p.files) == 0 {
		return nil
	}
	l.pkgs[p.path] = p
	service := ""
	if rel, _ := filepath.Rel(filepath.Join(l.root, "services"), dir); !strings.HasPrefix(rel, "..") {
		service = strings.Split(filepath.ToSlash(rel), "/")[0]
	}
	for _, f := range p.files {
		for _, d := range f.ast.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				l.addFunc(f, fd, service)
			}
		}
	}
	return nil
}

func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// envNames are the names of fd's parameters, receiver and variables that
// hold a *config.Env, and getenv its func(string) string parameters.
func envNames(f *file, fd *ast.FuncDecl) (env, getenv map[string]bool, params []string) {
	env, getenv = map[string]bool{}, map[string]bool{}
	isEnv := func(t ast.Expr) bool {
		s, ok := t.(*ast.StarExpr)
		if !ok {
			return false
		}
		switch x := s.X.(type) {
		case *ast.Ident:
			return x.Name == "Env" && strings.HasSuffix(f.pkg.path, "/pkg/config")
		case *ast.SelectorExpr:
			id, ok := x.X.(*ast.Ident)
			return ok && x.Sel.Name == "Env" && strings.HasSuffix(f.imports[id.Name], "/pkg/config")
		}
		return false
	}
	isGetenv := func(t ast.Expr) bool {
		ft, ok := t.(*ast.FuncType)
		return ok && ft.Params.NumFields() == 1 && ft.Results.NumFields() == 1
	}
	if fd.Recv != nil {
		for _, r := range fd.Recv.List {
			for _, n := range r.Names {
				if isEnv(r.Type) {
					env[n.Name] = true
				}
			}
		}
	}
	for _, fl := range fd.Type.Params.List {
		for _, n := range fl.Names {
			params = append(params, n.Name)
			if isEnv(fl.Type) {
				env[n.Name] = true
			}
			if isGetenv(fl.Type) && n.Name == "getenv" {
				getenv[n.Name] = true
			}
		}
		if len(fl.Names) == 0 {
			params = append(params, "_")
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
			return true
		}
		c, ok := as.Rhs[0].(*ast.CallExpr)
		if !ok {
			return true
		}
		if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "New" {
			if id, ok := s.X.(*ast.Ident); ok && strings.HasSuffix(f.imports[id.Name], "/pkg/config") {
				if lhs, ok := as.Lhs[0].(*ast.Ident); ok {
					env[lhs.Name] = true
				}
			}
		}
		return true
	})
	return env, getenv, params
}

func (l *loader) addFunc(f *file, fd *ast.FuncDecl, service string) {
	key := f.pkg.path + "." + fd.Name.Name
	method := ""
	if r := recvName(fd); r != "" {
		key = f.pkg.path + "." + r + "." + fd.Name.Name
		method = fd.Name.Name
	}
	x := &fn{key: key, method: method, pkg: f.pkg, service: service, docs: docTable(fd.Doc), docFile: f.path}
	env, getenv, params := envNames(f, fd)
	paramIndex := func(e ast.Expr) int {
		if id, ok := e.(*ast.Ident); ok {
			return slices.Index(params, id.Name)
		}
		return -1
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch fun := c.Fun.(type) {
		case *ast.Ident:
			if getenv[fun.Name] && len(c.Args) == 1 {
				if name, ok := l.stringConst(f, c.Args[0]); ok {
					x.reads = append(x.reads, read{name: name, method: "getenv", param: -1, file: f})
				}
				return true
			}
			x.calls = append(x.calls, call{target: f.pkg.path + "." + fun.Name, args: c.Args, file: f})
		case *ast.SelectorExpr:
			id, isIdent := fun.X.(*ast.Ident)
			if isIdent && env[id.Name] && readerMethods()[fun.Sel.Name] && len(c.Args) >= 1 {
				if name, ok := l.stringConst(f, c.Args[0]); ok {
					r := read{name: name, method: fun.Sel.Name, param: -1, file: f}
					if len(c.Args) >= 2 {
						r.def, r.param = c.Args[1], paramIndex(c.Args[1])
					}
					x.reads = append(x.reads, r)
					return true
				}
			}
			if isIdent {
				if ip, ok := f.imports[id.Name]; ok {
					x.calls = append(x.calls, call{target: ip + "." + fun.Sel.Name, args: c.Args, file: f})
					return true
				}
			}
			x.calls = append(x.calls, call{target: "." + fun.Sel.Name, args: c.Args, file: f})
		}
		return true
	})
	l.fns[key] = x
	if method != "" {
		l.methods[method] = append(l.methods[method], x)
	}
}

var (
	docEntry = regexp.MustCompile(`^\t\s*([A-Z][A-Z0-9_]{2,})\s+(\S.*)$`)
	docMore  = regexp.MustCompile(`^\t\s+(\S.*)$`)
)

// docTable reads the variable table of a doc comment: indented lines
// "NAME  meaning", continued on lines indented past the name.
func docTable(g *ast.CommentGroup) map[string]string {
	out := map[string]string{}
	if g == nil {
		return out
	}
	last := ""
	for _, c := range g.List {
		line := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), " ")
		if !strings.HasPrefix(c.Text, "//\t") {
			line = ""
		}
		if m := docEntry.FindStringSubmatch(line); m != nil {
			last = m[1]
			out[last] = m[2]
			continue
		}
		if m := docMore.FindStringSubmatch(line); m != nil && last != "" {
			out[last] += " " + m[1]
			continue
		}
		last = ""
	}
	return out
}

// stringConst evaluates e, a variable's name: a string literal or a
// constant of the repository.
func (l *loader) stringConst(f *file, e ast.Expr) (string, bool) {
	v, ok := l.eval(f, e, 0)
	if !ok || v.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(v), true
}

// eval evaluates a constant expression in f's context.
func (l *loader) eval(f *file, e ast.Expr, depth int) (constant.Value, bool) {
	if depth > 10 {
		return nil, false
	}
	switch x := e.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(x.Value, x.Kind, 0)
		return v, v.Kind() != constant.Unknown
	case *ast.ParenExpr:
		return l.eval(f, x.X, depth+1)
	case *ast.Ident:
		switch x.Name {
		case "true", "false":
			return constant.MakeBool(x.Name == "true"), true
		}
		if v, ok := f.pkg.consts[x.Name]; ok {
			return l.eval(v.file, v.expr, depth+1)
		}
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		if !ok {
			return nil, false
		}
		ip := f.imports[id.Name]
		if ip == "time" {
			units := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond,
				"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}
			if d, ok := units[x.Sel.Name]; ok {
				return constant.MakeInt64(int64(d)), true
			}
			return nil, false
		}
		if p, ok := l.pkgs[ip]; ok {
			if v, ok := p.consts[x.Sel.Name]; ok {
				return l.eval(v.file, v.expr, depth+1)
			}
		}
	case *ast.BinaryExpr:
		a, ok1 := l.eval(f, x.X, depth+1)
		b, ok2 := l.eval(f, x.Y, depth+1)
		if !ok1 || !ok2 {
			return nil, false
		}
		switch x.Op {
		case token.SHL, token.SHR:
			n, ok := constant.Uint64Val(b)
			if !ok {
				return nil, false
			}
			return constant.Shift(a, x.Op, uint(n)), true
		case token.ADD, token.SUB, token.MUL, token.QUO:
			op := x.Op
			if op == token.QUO && a.Kind() == constant.Int && b.Kind() == constant.Int {
				op = token.QUO_ASSIGN // go/constant's integer division
			}
			return constant.BinaryOp(a, op, b), true
		}
	case *ast.CallExpr:
		// A conversion such as string(FormatGeneric) or int64(n).
		if len(x.Args) == 1 {
			return l.eval(f, x.Args[0], depth+1)
		}
	}
	return nil, false
}

// show renders a default for the reference.
func (l *loader) show(f *file, method string, e ast.Expr) string {
	if e == nil {
		return "none"
	}
	v, ok := l.eval(f, e, 0)
	if !ok {
		return "computed: see meaning"
	}
	switch {
	case method == "Duration":
		n, _ := constant.Int64Val(v)
		return "`" + formatDuration(time.Duration(n)) + "`"
	case v.Kind() == constant.String:
		if constant.StringVal(v) == "" {
			return "none"
		}
		return "`" + constant.StringVal(v) + "`"
	case v.Kind() == constant.Float:
		f, _ := constant.Float64Val(v)
		return fmt.Sprintf("`%g`", f)
	}
	return "`" + v.ExactString() + "`"
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// targets resolves a call to the functions it may reach.
func (l *loader) targets(c call) []*fn {
	if strings.HasPrefix(c.target, ".") {
		return l.methods[c.target[1:]]
	}
	if x, ok := l.fns[c.target]; ok {
		return []*fn{x}
	}
	return nil
}

// reach is every read a function makes or reaches through its calls.
func (l *loader) reach(x *fn, seen map[*fn]bool, out map[*fn]bool) {
	if seen[x] {
		return
	}
	seen[x] = true
	if len(x.reads) > 0 {
		out[x] = true
	}
	for _, c := range x.calls {
		for _, t := range l.targets(c) {
			if t.service == "" || t.service == x.service {
				l.reach(t, seen, out)
			}
		}
	}
}

func (l *loader) variables() ([]Variable, error) {
	vars := map[string]*Variable{}
	meanings := map[string][]string{}
	for _, x := range l.fns {
		for name, m := range x.docs {
			meanings[name] = append(meanings[name], x.docFile+"\x00"+m)
		}
	}
	var services []string
	for _, x := range l.fns {
		if x.service != "" && !slices.Contains(services, x.service) {
			services = append(services, x.service)
		}
	}
	slices.Sort(services)
	for _, svc := range services {
		readers := map[*fn]bool{}
		seen := map[*fn]bool{}
		paramDefaults := map[string]string{} // variable -> default from this service's call
		for _, x := range l.fns {
			if x.service != svc {
				continue
			}
			l.reach(x, seen, readers)
			for _, c := range x.calls {
				for _, t := range l.targets(c) {
					for _, r := range t.reads {
						if r.param >= 0 && r.param < len(c.args) {
							paramDefaults[r.name] = l.show(c.file, r.method, c.args[r.param])
						}
					}
				}
			}
		}
		for r := range readers {
			for _, rd := range r.reads {
				v := vars[rd.name]
				if v == nil {
					v = &Variable{Name: rd.name, Defaults: map[string]string{}}
					vars[rd.name] = v
				}
				if !slices.Contains(v.Services, svc) {
					v.Services = append(v.Services, svc)
				}
				def := l.show(rd.file, rd.method, rd.def)
				if rd.param >= 0 {
					def = paramDefaults[rd.name]
					if def == "" {
						continue // a call from pkg/ only (ReadBase's migrate): not this service's default
					}
				}
				if old, ok := v.Defaults[svc]; !ok || old == "none" {
					v.Defaults[svc] = def
				}
			}
		}
	}
	var out []Variable
	var problems []string
	for name, v := range vars {
		ms := meanings[name]
		switch len(ms) {
		case 0:
			problems = append(problems, fmt.Sprintf("%s (read by %s) has no meaning: add it to the variable table in the doc comment of the function that reads it", name, strings.Join(v.Services, ", ")))
			continue
		case 1:
			v.Where, v.Meaning, _ = strings.Cut(ms[0], "\x00")
		default:
			var where []string
			for _, m := range ms {
				w, _, _ := strings.Cut(m, "\x00")
				where = append(where, w)
			}
			slices.Sort(where)
			problems = append(problems, fmt.Sprintf("%s is described in %d places (%s): keep one", name, len(ms), strings.Join(where, ", ")))
			continue
		}
		out = append(out, *v)
	}
	for name, ms := range meanings {
		if _, ok := vars[name]; !ok {
			for _, m := range ms {
				w, _, _ := strings.Cut(m, "\x00")
				problems = append(problems, fmt.Sprintf("%s is described in %s but no service reads it", name, w))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("configuration reference:\n  %s", strings.Join(problems, "\n  "))
	}
	slices.SortFunc(out, func(a, b Variable) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sections orders the reference by where a variable's meaning is written.
func sections() []struct{ prefix, title string } {
	return []struct{ prefix, title string }{
		{"pkg/service/", "Every service"},
		{"pkg/telemetry/", "Tracing (OpenTelemetry)"},
		{"pkg/kafkax/", "Kafka connection and group membership"},
		{"pkg/alert/", "Alerts"},
		{"pkg/eventproof/", "Money event proof"},
		{"pkg/config/", "PSP reconciliation schedule and money back"},
		{"pkg/outbound/", "Outbound endpoints (URL safety)"},
		{"services/webhook-api/", "webhook-api"},
		{"services/outbox-relay/", "outbox-relay"},
		{"services/payout-worker/", "payout-worker"},
		{"services/dlq-admin/", "dlq-admin"},
		{"", "Other"},
	}
}

func render(vars []Variable) []byte {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	fmt.Fprint(w, `# Configuration

<!-- Generated by tools/devstack/cmd/aegis-configdoc (make generate) from the
code that reads the environment; do not edit. A variable's meaning is the
variable table in the doc comment of the function that reads it. -->

Every binary runs on its own from environment variables with local
defaults; a malformed or inconsistent value stops it at start with an error
that names the variable. This page lists every variable the services read,
generated from the readers (`+"`pkg/config`"+` and each service's `+"`run.go`"+`):
its default, the services that read it and what it means. A value set to
the empty string counts as unset. Durations are Go durations (`+"`500ms`"+`,
`+"`30s`"+`, `+"`24h`"+`). The variables a deployment must set are in
[docs/design/contract.md](../design/contract.md#environment).
`)
	all := 0
	for _, v := range vars {
		all = max(all, len(v.Services))
	}
	done := map[string]bool{}
	for _, s := range sections() {
		var rows []Variable
		for _, v := range vars {
			if !done[v.Name] && strings.HasPrefix(v.Where, s.prefix) {
				rows = append(rows, v)
				done[v.Name] = true
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n## %s\n\n| variable | default | read by | meaning |\n|---|---|---|---|\n", s.title)
		for _, v := range rows {
			readBy := strings.Join(v.Services, ", ")
			if len(v.Services) == all && all > 1 {
				readBy = "every service"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", v.Name, defaults(v), readBy, strings.ReplaceAll(v.Meaning, "|", `\|`))
		}
	}
	_ = w.Flush()
	return b.Bytes()
}

// defaults shows one default, or each service's when they differ.
func defaults(v Variable) string {
	var ds []string
	for _, s := range v.Services {
		if d, ok := v.Defaults[s]; ok && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	if len(ds) <= 1 {
		if len(ds) == 0 {
			return "none"
		}
		return ds[0]
	}
	var parts []string
	for _, s := range v.Services {
		if d, ok := v.Defaults[s]; ok {
			parts = append(parts, s+" "+d)
		}
	}
	return strings.Join(parts, ", ")
}
