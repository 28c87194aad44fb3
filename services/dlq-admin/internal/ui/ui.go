package ui

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// static holds the page; it is read-only.
//
//go:embed static
var static embed.FS

// ContentSecurityPolicy is sent with the page and its assets.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Mount serves the page at GET / and its assets under GET /ui/.
func Mount(r chi.Router) error {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		return fmt.Errorf("ui assets: %w", err)
	}
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		return fmt.Errorf("ui page: %w", err)
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(assets)))
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		secure(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
	r.Get("/ui/*", func(w http.ResponseWriter, req *http.Request) {
		// Files only: no directory listings.
		if strings.HasSuffix(req.URL.Path, "/") {
			http.NotFound(w, req)
			return
		}
		secure(w)
		files.ServeHTTP(w, req)
	})
	return nil
}

func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// The page changes with the binary; always revalidate.
	h.Set("Cache-Control", "no-cache")
}
