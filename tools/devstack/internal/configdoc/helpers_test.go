package configdoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

func parseDoc(t *testing.T, src string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return docTable(f.Decls[0].(*ast.FuncDecl).Doc)
}
